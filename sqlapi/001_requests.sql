-- The request table's API: validation at insert, cancel, wait, ping, row-level security.

-- Kinds every installation has.
CREATE OR REPLACE FUNCTION dataenv.validate_ping(args jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF k NOT IN ('sleep_ms') THEN
            RAISE EXCEPTION 'ping: unknown argument "%"', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF args ? 'sleep_ms' AND (jsonb_typeof(args->'sleep_ms') <> 'number'
                              OR (args->>'sleep_ms')::numeric NOT BETWEEN 0 AND 600000) THEN
        RAISE EXCEPTION 'ping: sleep_ms must be a number of milliseconds between 0 and 600000'
            USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_ping(jsonb) IS 'Validates the args of a ping request.';

-- Validation runs on every request insert, so it must not plan anything per row: the kinds'
-- validators are compiled into one function, dataenv.validate_request(kind, args), a CASE over
-- the kinds with a static call each (plpgsql caches those plans), rebuilt whenever
-- request_kinds changes. A dynamic EXECUTE per insert cost more than the insert itself.
CREATE OR REPLACE FUNCTION dataenv.compile_request_kinds() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $compile$
DECLARE
    arms text;
BEGIN
    SELECT string_agg(format(E'\n        WHEN %L THEN %s', kind,
                             CASE WHEN validator IS NULL THEN 'NULL;'
                                  ELSE format('PERFORM %s(args);', validator::regproc) END),
                      '' ORDER BY kind)
      INTO arms FROM dataenv.request_kinds;
    EXECUTE format($def$
CREATE OR REPLACE FUNCTION dataenv.validate_request(kind text, args jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    CASE kind%s
    ELSE
        RAISE EXCEPTION 'dataenv request: unknown kind "%%"', kind
            USING ERRCODE = '22023',
                  HINT = 'SELECT kind, description FROM dataenv.request_kinds lists the kinds.';
    END CASE;
END
$body$$def$, coalesce(arms, E'\n        WHEN NULL THEN NULL;'));
    COMMENT ON FUNCTION dataenv.validate_request(text, jsonb) IS
        'Generated from dataenv.request_kinds (do not edit): refuses an unknown kind and runs the kind''s validator on args.';
    REVOKE EXECUTE ON FUNCTION dataenv.validate_request(text, jsonb) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION dataenv.validate_request(text, jsonb) TO dataenv_user, dataenv_admin;
    RETURN NULL;
END
$compile$;
COMMENT ON FUNCTION dataenv.compile_request_kinds() IS
    'Rebuilds dataenv.validate_request from dataenv.request_kinds.';

DROP TRIGGER IF EXISTS request_kinds_compile ON dataenv.request_kinds;
CREATE TRIGGER request_kinds_compile AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON dataenv.request_kinds
    FOR EACH STATEMENT EXECUTE FUNCTION dataenv.compile_request_kinds();

INSERT INTO dataenv.request_kinds (kind, validator, description)
VALUES ('ping', 'dataenv.validate_ping(jsonb)'::regprocedure, 'Does nothing; health checks and benchmarks.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, description = EXCLUDED.description;

-- BEFORE INSERT: whoever inserts (a function or app code) gets the same validation. The columns
-- only the sidecar sets keep their defaults because users may insert kind and args alone (and
-- admins requested_by): column privileges, not this trigger, keep them from being forged.
CREATE OR REPLACE FUNCTION dataenv.requests_before_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.kind IS NULL OR NEW.kind = '' THEN
        RAISE EXCEPTION 'dataenv request: kind is required' USING ERRCODE = '22023';
    END IF;
    IF NEW.args IS NULL THEN
        NEW.args := '{}'::jsonb;
    ELSIF jsonb_typeof(NEW.args) <> 'object' THEN
        RAISE EXCEPTION 'dataenv request %: args must be a JSON object, got %', NEW.kind, jsonb_typeof(NEW.args)
            USING ERRCODE = '22023';
    ELSIF octet_length(NEW.args::text) > 65536 THEN
        RAISE EXCEPTION 'dataenv request %: args are % bytes, the limit is 65536', NEW.kind, octet_length(NEW.args::text)
            USING ERRCODE = '54000';
    END IF;
    PERFORM dataenv.validate_request(NEW.kind, NEW.args);
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.requests_before_insert() IS
    'Validates kind and args of a new request (dataenv.validate_request).';

DROP TRIGGER IF EXISTS requests_before_insert ON dataenv.requests;
CREATE TRIGGER requests_before_insert BEFORE INSERT ON dataenv.requests
    FOR EACH ROW EXECUTE FUNCTION dataenv.requests_before_insert();

-- BEFORE UPDATE of cancel_requested: users may only raise it (column privilege); a pending
-- request is cancelled on the spot, a running one is cancelled by the sidecar when it decodes the
-- update. The sidecar's own updates (claims, steps, outcomes) set updated_at themselves and skip
-- the trigger: it would be a plpgsql call per outcome row.
CREATE OR REPLACE FUNCTION dataenv.requests_before_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF OLD.cancel_requested AND NOT NEW.cancel_requested THEN
        RAISE EXCEPTION 'dataenv request %: a cancellation cannot be withdrawn', OLD.id USING ERRCODE = '22023';
    END IF;
    IF NEW.cancel_requested AND NOT OLD.cancel_requested AND OLD.status = 'pending' THEN
        NEW.status := 'cancelled';
        NEW.error := 'cancelled before it started';
        NEW.finished_at := clock_timestamp();
    END IF;
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.requests_before_update() IS
    'Keeps cancellations one-way and finishes a pending request that is cancelled.';

DROP TRIGGER IF EXISTS requests_before_update ON dataenv.requests;
CREATE TRIGGER requests_before_update BEFORE UPDATE ON dataenv.requests
    FOR EACH ROW WHEN (OLD.cancel_requested IS DISTINCT FROM NEW.cancel_requested)
    EXECUTE FUNCTION dataenv.requests_before_update();

-- AFTER UPDATE: tell LISTENers (application code) that a request finished. Once per statement
-- over its transition tables, not once per row: the sidecar writes outcomes in batches, and a
-- plpgsql call per row was a third of a batch's cost. (A column list, UPDATE OF status, is not
-- allowed together with transition tables; the join keeps only rows whose status became final.)
CREATE OR REPLACE FUNCTION dataenv.requests_notify_finished() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('dataenv_request_finished', n.id::text)
       FROM requests_new n
       JOIN requests_old o ON o.id = n.id
      WHERE n.status IN ('succeeded', 'failed', 'cancelled')
        AND o.status IS DISTINCT FROM n.status;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.requests_notify_finished() IS
    'Sends the request id on channel dataenv_request_finished for every request an UPDATE brought to a final status.';

DROP TRIGGER IF EXISTS requests_notify_finished ON dataenv.requests;
CREATE TRIGGER requests_notify_finished AFTER UPDATE ON dataenv.requests
    REFERENCING OLD TABLE AS requests_old NEW TABLE AS requests_new
    FOR EACH STATEMENT EXECUTE FUNCTION dataenv.requests_notify_finished();

-- AFTER UPDATE: a new cancellation is recorded in dataenv.request_cancellations, whose inserts
-- the sidecar decodes (the request table is published for inserts only). Pending requests are
-- recorded too: a stateless request runs without being claimed and must be stopped as well.
CREATE OR REPLACE FUNCTION dataenv.requests_record_cancellation() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO dataenv.request_cancellations (request_id, requested_by)
    VALUES (NEW.id, session_user) ON CONFLICT (request_id) DO NOTHING;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.requests_record_cancellation() IS
    'Records a cancellation for the sidecar to decode when cancel_requested is raised.';

DROP TRIGGER IF EXISTS requests_record_cancellation ON dataenv.requests;
CREATE TRIGGER requests_record_cancellation AFTER UPDATE OF cancel_requested ON dataenv.requests
    FOR EACH ROW WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested)
    EXECUTE FUNCTION dataenv.requests_record_cancellation();

REVOKE ALL ON dataenv.request_cancellations FROM PUBLIC;
GRANT SELECT ON dataenv.request_cancellations TO dataenv_admin;

-- Row-level security: a user sees and cancels only their own requests; dataenv_admin sees all.
-- The table owner (the sidecar's role) bypasses RLS.
ALTER TABLE dataenv.requests ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS requests_own ON dataenv.requests;
CREATE POLICY requests_own ON dataenv.requests
    USING (requested_by = current_user OR pg_has_role(current_user, 'dataenv_admin', 'MEMBER'))
    WITH CHECK (requested_by = current_user OR pg_has_role(current_user, 'dataenv_admin', 'MEMBER'));

REVOKE ALL ON dataenv.requests FROM PUBLIC;
GRANT SELECT, INSERT (kind, args) , UPDATE (cancel_requested) ON dataenv.requests TO dataenv_user, dataenv_admin;
GRANT INSERT (requested_by) ON dataenv.requests TO dataenv_admin;
GRANT SELECT ON dataenv.request_kinds TO dataenv_user, dataenv_admin;

-- plpgsql rather than sql: a SQL function that cannot be inlined plans its INSERT on every
-- call, and ping is what health checks and benchmarks call in a loop; plpgsql keeps the plan.
CREATE OR REPLACE FUNCTION dataenv.ping() RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    request_id uuid;
BEGIN
    INSERT INTO dataenv.requests (kind, args) VALUES ('ping', '{}'::jsonb) RETURNING id INTO request_id;
    RETURN request_id;
END
$$;
COMMENT ON FUNCTION dataenv.ping() IS
    'Makes a request that does nothing and returns its id; SELECT * FROM dataenv.wait(id) returns it finished.';

CREATE OR REPLACE FUNCTION dataenv.cancel(request_id uuid) RETURNS dataenv.requests
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.cancel: request_id is required' USING ERRCODE = '22004';
    END IF;
    UPDATE dataenv.requests SET cancel_requested = true
     WHERE id = request_id AND status IN ('pending', 'running') AND NOT cancel_requested;
    SELECT * INTO r FROM dataenv.requests WHERE id = request_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv.cancel: no request % visible to %', request_id, current_user
            USING ERRCODE = 'P0002';
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION dataenv.cancel(uuid) IS
    'Cancels a request: a pending one is cancelled at once, a running one is stopped by the sidecar. Returns the row; finished requests are left as they are.';

-- wait() cannot use LISTEN: notifications reach a session only between transactions, never inside
-- a function. Instead the sidecar holds an advisory "gate" lock per request from the moment it
-- decodes the request until the outcome is committed; wait() queues on that lock and re-reads the
-- row when it is released. Only in the short window before the sidecar has seen the request (or
-- while no sidecar runs) does wait() re-check with a capped backoff.
CREATE OR REPLACE FUNCTION dataenv.wait(request_id uuid, timeout interval DEFAULT '30 s')
RETURNS dataenv.requests
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
    deadline timestamptz := clock_timestamp() + timeout;
    remaining_ms bigint;
    gate_class integer := dataenv.lock_class('gate');
    gate_key integer := hashtext(request_id::text);
    old_lock_timeout text := current_setting('lock_timeout');
    backoff double precision := 0.001;
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.wait: request_id is required' USING ERRCODE = '22004';
    END IF;
    IF timeout IS NULL OR timeout < interval '0' THEN
        RAISE EXCEPTION 'dataenv.wait: timeout must be a non-negative interval' USING ERRCODE = '22023';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'dataenv.wait needs READ COMMITTED: under % the outcome can never become visible',
            current_setting('transaction_isolation') USING ERRCODE = '25000';
    END IF;
    LOOP
        SELECT * INTO r FROM dataenv.requests WHERE id = request_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dataenv.wait: no request % visible to %', request_id, current_user
                USING ERRCODE = 'P0002',
                      HINT = 'A request made in another, uncommitted transaction is not visible yet.';
        END IF;
        IF r.status IN ('succeeded', 'failed', 'cancelled') THEN
            RETURN r;
        END IF;
        IF r.xact = pg_current_xact_id_if_assigned() THEN
            RAISE EXCEPTION 'dataenv.wait: request % was made in this transaction, which has not committed', request_id
                USING ERRCODE = '25000',
                      HINT = 'COMMIT first: the sidecar only sees committed requests, so waiting here would never end.';
        END IF;
        IF clock_timestamp() >= deadline THEN
            RETURN r;
        END IF;
        remaining_ms := ceil(extract(epoch FROM deadline - clock_timestamp()) * 1000);
        IF pg_try_advisory_lock_shared(gate_class, gate_key) THEN
            -- Nobody holds the gate: the sidecar has not seen the request yet.
            PERFORM pg_advisory_unlock_shared(gate_class, gate_key);
            PERFORM pg_sleep(least(backoff, remaining_ms / 1000.0));
            backoff := least(backoff * 2, 0.05);
        ELSE
            PERFORM set_config('lock_timeout', remaining_ms::text, true);
            BEGIN
                PERFORM pg_advisory_lock_shared(gate_class, gate_key);
                PERFORM pg_advisory_unlock_shared(gate_class, gate_key);
            EXCEPTION WHEN lock_not_available THEN
                NULL;
            END;
            PERFORM set_config('lock_timeout', old_lock_timeout, true);
            backoff := 0.001;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.wait(uuid, interval) IS
    'Returns the request once it is finished, or as it stands when the timeout passes. Raises if the request was made in the still-open calling transaction.';

GRANT EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval)
    TO dataenv_user, dataenv_admin;
REVOKE EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval) FROM PUBLIC;

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
       s.ready AND s.heartbeat_at > clock_timestamp() - interval '30 s' AS ready
  FROM dataenv.sidecars s
  LEFT JOIN pg_catalog.pg_replication_slots slot
         ON slot.slot_name = dataenv.slot_name();
COMMENT ON VIEW dataenv.sidecar_status IS
    'One row per sidecar process: leader, heartbeat, confirmed LSN, retained WAL, schema version, readiness.';
GRANT SELECT ON dataenv.sidecar_status TO dataenv_user, dataenv_admin;
