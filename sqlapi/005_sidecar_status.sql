-- Slots are cluster-wide, so the name carries the database OID: several installations (and test
-- databases) in one cluster never share a slot.
CREATE OR REPLACE FUNCTION dataenv.slot_name() RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'dataenv_' || oid::text FROM pg_catalog.pg_database WHERE datname = current_database()
$$;
COMMENT ON FUNCTION dataenv.slot_name() IS 'Name of the logical replication slot the sidecar of this installation uses.';

CREATE OR REPLACE VIEW dataenv.sidecar_status AS
SELECT s.instance_id,
       s.hostname,
       s.pid,
       s.version,
       s.is_leader AS leader,
       s.heartbeat_at,
       clock_timestamp() - s.heartbeat_at AS heartbeat_age,
       s.confirmed_lsn,
       slot.confirmed_flush_lsn AS slot_confirmed_lsn,
       pg_wal_lsn_diff(pg_current_wal_lsn(), slot.restart_lsn)::bigint AS slot_retained_wal_bytes,
       (SELECT max(version) FROM dataenv.schema_migrations) AS schema_version,
       s.ready AND s.heartbeat_at > clock_timestamp() - interval '30 s' AS ready,
       age.oldest_pending_age,
       age.oldest_unfinished_age,
       (SELECT count(*) FROM dataenv.satellites) AS satellites,
       s.satellite_connections_open,
       s.satellite_connections_in_use,
       age.satellite_envelopes_waiting
  FROM dataenv.sidecars s
  LEFT JOIN pg_catalog.pg_replication_slots slot
         ON slot.slot_name = dataenv.slot_name()
 CROSS JOIN (SELECT clock_timestamp() - min(r.created_at) FILTER (WHERE r.status = 'pending') AS oldest_pending_age,
                    clock_timestamp() - min(r.created_at) AS oldest_unfinished_age,
                    count(*) FILTER (WHERE r.kind = 'satellite') AS satellite_envelopes_waiting
               FROM dataenv.requests r WHERE r.status IN ('pending', 'running')) age;
COMMENT ON VIEW dataenv.sidecar_status IS
    'One row per sidecar process: leader, heartbeat, confirmed LSN, retained WAL, schema version, readiness; and, for the installation, the age of the oldest pending and of the oldest unfinished (pending or running) request (NULL when there is none); satellite installations registered, the sidecar''s connections to them (open, in use; at most --satellite-connections) and envelopes of satellite requests not finished yet.';
GRANT SELECT ON dataenv.sidecar_status TO dataenv_user, dataenv_admin;
