-- A satellite's request API: the row is written in the caller's transaction; at its commit a
-- deferred trigger files the envelope in the control database; the sidecar runs it once the
-- origin transaction committed and writes the outcome back here (docs/satellites.md). The
-- request table's triggers, ping, cancel and wait's checks are written once for both
-- installations (sqlapi/shared/006); what is here is what a satellite does differently.

-- A libpq connection-string value, quoted.
CREATE OR REPLACE FUNCTION dataenv.conninfo_value(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT '''' || replace(replace(v, '\', '\\'), '''', '\''') || '''' $$;
COMMENT ON FUNCTION dataenv.conninfo_value(text) IS 'Quotes v as a libpq connection-string value.';

-- Runs sql in the control database as this satellite's login role, over one dblink connection
-- kept per session (a connection per commit would cost more than the request). The secret is
-- read here, by the definer; callers never see it, and dblink itself is executable by nobody else.
CREATE OR REPLACE FUNCTION dataenv.control_exec(sql text) RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.control_credentials;
    control name := (SELECT i.control_database FROM dataenv.installation i);
    host text := nullif(btrim(split_part(current_setting('unix_socket_directories'), ',', 1)), '');
    conn_name constant text := 'dataenv_control';
    msg text;
BEGIN
    IF sql IS NULL THEN
        RAISE EXCEPTION 'dataenv.control_exec: sql is required' USING ERRCODE = '22004';
    END IF;
    IF conn_name = ANY (coalesce(dataenv.dblink_get_connections(), '{}')) THEN
        BEGIN
            RETURN QUERY SELECT t.v FROM dataenv.dblink(conn_name, sql) AS t(v text);
            RETURN;
        EXCEPTION WHEN connection_exception OR sqlclient_unable_to_establish_sqlconnection THEN
            PERFORM dataenv.dblink_disconnect(conn_name);  -- a stale session (control restarted): once more, fresh
        END;
    END IF;
    SELECT * INTO c FROM dataenv.control_credentials;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv: control installation unavailable: this satellite has no registration with database %', to_json(control::text)::text
            USING ERRCODE = '55000', HINT = 'Run dataenv install --dsn <this database> --control-database <control> again.';
    END IF;
    BEGIN
        PERFORM dataenv.dblink_connect(conn_name, format('host=%s port=%s dbname=%s user=%s password=%s application_name=%s',
            dataenv.conninfo_value(coalesce(host, 'localhost')), dataenv.conninfo_value(current_setting('port')),
            dataenv.conninfo_value(control), dataenv.conninfo_value(c.login_role), dataenv.conninfo_value(c.password),
            dataenv.conninfo_value('dataenv_satellite')));
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        RAISE EXCEPTION 'dataenv: control installation unavailable: cannot connect to database %: %', to_json(control::text)::text, msg
            USING ERRCODE = '55000', HINT = 'Is dataenv installed there (dataenv install --dsn <control>) and this satellite registered (dataenv install --dsn <this database> --control-database <control>)?';
    END;
    RETURN QUERY SELECT t.v FROM dataenv.dblink(conn_name, sql) AS t(v text);
END
$$;
COMMENT ON FUNCTION dataenv.control_exec(text) IS
    'Runs sql (whose rows are one text column) in the control installation as this satellite''s login role (dblink, one connection per session); raises 55000 "control installation unavailable" when it cannot connect.';

-- DEFERRABLE INITIALLY DEFERRED: runs at commit, so the envelope lands just before the origin
-- commits (and never for a transaction that rolls back earlier). It still commits on its own, so
-- it can outlive a rollback that happens after it: the sidecar discards those.
-- The envelope's transaction commits without waiting for its own WAL flush (synchronous_commit
-- off, for that transaction only): the origin commits right after it in the same cluster, so in
-- the same WAL, and the flush of the origin's commit record flushes the envelope's earlier one
-- too (a synchronous standby that confirmed the origin's commit has received it as well). A
-- crash before that flush loses both, or keeps an envelope whose origin did not commit, which
-- the sidecar discards; and the sidecar runs an envelope only once its origin committed, by
-- which time the envelope is durable. One fsync fewer on every satellite request's commit.
CREATE OR REPLACE FUNCTION dataenv.requests_send_envelope() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    msg text;
    state text;
BEGIN
    BEGIN
        PERFORM dataenv.control_exec(format('SELECT dataenv.satellite_enqueue_v1(%L::uuid, %L::xid8, %L, %L::name, %L::text)::text'
                                            ' FROM pg_catalog.set_config(''synchronous_commit'', ''off'', true)',
                                            NEW.id, NEW.xact, NEW.kind, NEW.requested_by, NEW.args->>'workspace'));
    EXCEPTION WHEN undefined_function OR invalid_schema_name OR insufficient_privilege OR invalid_authorization_specification THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        RAISE EXCEPTION 'dataenv: control installation unavailable: %', msg
            USING ERRCODE = '55000', HINT = 'The control installation was removed or does not know this satellite: reinstall it, then this satellite.';
    END;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.requests_send_envelope() IS
    'At commit, files the envelope of a new request in the control installation (dataenv.satellite_enqueue_v1 over dblink).';
DROP TRIGGER IF EXISTS requests_send_envelope ON dataenv.requests;
CREATE CONSTRAINT TRIGGER requests_send_envelope AFTER INSERT ON dataenv.requests
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION dataenv.requests_send_envelope();

-- A cancellation of a request already running (a job, claimed in the control) is passed on at
-- commit to its envelope, which the sidecar then stops; the outcome, cancelled, is written back
-- here. A pending request is finished here at once (requests_before_update) and needs nothing.
CREATE OR REPLACE FUNCTION dataenv.requests_send_cancellation() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    msg text;
BEGIN
    BEGIN
        PERFORM dataenv.control_exec(format('SELECT dataenv.satellite_cancel_v1(%L::uuid)::text', NEW.id));
    EXCEPTION WHEN undefined_function OR invalid_schema_name OR insufficient_privilege OR invalid_authorization_specification THEN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        RAISE EXCEPTION 'dataenv: control installation unavailable: %', msg
            USING ERRCODE = '55000', HINT = 'The control installation was removed, is older than this satellite or does not know it: upgrade or reinstall it, then this satellite.';
    END;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.requests_send_cancellation() IS
    'At commit, passes the cancellation of a running request on to its envelope in the control installation (dataenv.satellite_cancel_v1 over dblink).';
DROP TRIGGER IF EXISTS requests_send_cancellation ON dataenv.requests;
CREATE CONSTRAINT TRIGGER requests_send_cancellation AFTER UPDATE OF cancel_requested ON dataenv.requests
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested AND OLD.status = 'running')
    EXECUTE FUNCTION dataenv.requests_send_cancellation();

ALTER TABLE dataenv.requests ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS requests_own ON dataenv.requests;
DO $rls$
DECLARE
    inst dataenv.installation;
BEGIN
    SELECT * INTO STRICT inst FROM dataenv.installation;
    EXECUTE format($p$CREATE POLICY requests_own ON dataenv.requests
        USING (requested_by = current_user OR pg_catalog.pg_has_role(current_user, %1$L, 'MEMBER'))
        WITH CHECK (requested_by = current_user OR pg_catalog.pg_has_role(current_user, %1$L, 'MEMBER'))$p$, inst.admin_role);
    REVOKE ALL ON dataenv.requests FROM PUBLIC;
    EXECUTE format('GRANT SELECT, INSERT (kind, args), UPDATE (cancel_requested) ON dataenv.requests TO %I, %I', inst.user_role, inst.admin_role);
    EXECUTE format('GRANT INSERT (requested_by) ON dataenv.requests TO %I', inst.admin_role);
END
$rls$;

-- The sidecar holds no gate lock in a satellite (advisory locks are per database and it keeps no
-- session here), so wait polls: every millisecond for the first 20 ms, where a ping ends when
-- the sidecar has a connection to this database, then with a backoff capped at 10 ms (a poll
-- costs the backend some 45 us of CPU on a loaded 2-core machine, so polling every millisecond
-- for longer would cost more CPU than the latency it saves). Not the control's wait, which
-- queues on that lock (sqlapi/004), and so not in sqlapi/shared.
CREATE OR REPLACE FUNCTION dataenv.wait(request_id uuid, timeout interval DEFAULT '30 s')
RETURNS dataenv.requests
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
    deadline timestamptz := clock_timestamp() + timeout;
    started timestamptz := clock_timestamp();
    backoff double precision := 0.001;
BEGIN
    PERFORM dataenv.wait_check(request_id, timeout);
    LOOP
        SELECT * INTO r FROM dataenv.requests WHERE id = request_id;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'dataenv.wait: no request % visible to %', request_id, current_user
                USING ERRCODE = 'P0002', HINT = 'A request made in another, uncommitted transaction is not visible yet.';
        END IF;
        IF r.status IN ('succeeded', 'failed', 'cancelled') OR clock_timestamp() >= deadline THEN
            RETURN r;
        END IF;
        IF r.xact = pg_current_xact_id_if_assigned() THEN
            RAISE EXCEPTION 'dataenv.wait: request % was made in this transaction, which has not committed', request_id
                USING ERRCODE = '25000', HINT = 'COMMIT first: the request runs only after its transaction commits.';
        END IF;
        PERFORM pg_sleep(least(backoff, greatest(extract(epoch FROM deadline - clock_timestamp()), 0)));
        IF clock_timestamp() - started > interval '20 ms' THEN
            backoff := least(backoff * 2, 0.01);
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.wait(uuid, interval) IS
    'Returns the request once it is finished, or as it stands when the timeout passes. Raises if the request was made in the still-open calling transaction.';

-- Read-only and best effort: with the control installation gone or unreachable it warns and
-- returns no rows instead of failing the query it is part of.
CREATE OR REPLACE FUNCTION dataenv.control_status()
RETURNS TABLE (leader_ready boolean, heartbeat_age interval, schema_version integer,
               protocol_min integer, protocol_max integer, envelopes_waiting bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    msg text;
BEGIN
    RETURN QUERY
    SELECT (j->>'leader_ready')::boolean, (j->>'heartbeat_age')::interval, (j->>'schema_version')::integer,
           (j->>'protocol_min')::integer, (j->>'protocol_max')::integer, (j->>'envelopes_waiting')::bigint
      FROM dataenv.control_exec('SELECT pg_catalog.row_to_json(s)::text FROM dataenv.satellite_status_v1() s') v,
           LATERAL (SELECT v::jsonb AS j) x;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
    IF msg NOT LIKE 'dataenv: control installation unavailable%' THEN
        msg := 'dataenv: control installation unavailable: ' || msg;
    END IF;
    RAISE WARNING '%', msg;
END
$$;
COMMENT ON FUNCTION dataenv.control_status() IS
    'The engine''s state as the control installation reports it to this satellite; warns and returns no rows when the control installation is unavailable.';

CREATE OR REPLACE VIEW dataenv.sidecar_status AS
SELECT cs.leader_ready AS ready, cs.heartbeat_age, cs.schema_version AS control_schema_version,
       (SELECT max(m.version) FROM dataenv.schema_migrations m) AS schema_version,
       i.protocol, cs.protocol_min AS control_protocol_min, cs.protocol_max AS control_protocol_max,
       cs.envelopes_waiting,
       (SELECT count(*) FROM dataenv.requests r WHERE r.status IN ('pending', 'running')) AS unfinished
  FROM dataenv.control_status() cs CROSS JOIN dataenv.installation i;
COMMENT ON VIEW dataenv.sidecar_status IS
    'This satellite as the engine serves it: whether a ready leader sidecar runs, its heartbeat age, the control''s and this satellite''s schema versions and protocols, this satellite''s envelopes still waiting in the control installation and requests unfinished here (visible ones). Warns and returns no rows when the control installation is unavailable.';

DO $grants$
DECLARE
    inst dataenv.installation;
    f regprocedure;
BEGIN
    SELECT * INTO STRICT inst FROM dataenv.installation;
    REVOKE ALL ON FUNCTION dataenv.control_exec(text), dataenv.requests_send_envelope(), dataenv.requests_send_cancellation() FROM PUBLIC;
    REVOKE ALL ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval), dataenv.wait_check(uuid, interval),
        dataenv.control_status(), dataenv.conninfo_value(text) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION dataenv.ping(), dataenv.cancel(uuid), dataenv.wait(uuid, interval), dataenv.wait_check(uuid, interval),
        dataenv.control_status() TO %I, %I',
                   inst.user_role, inst.admin_role);
    REVOKE ALL ON dataenv.sidecar_status FROM PUBLIC;
    EXECUTE format('GRANT SELECT ON dataenv.sidecar_status TO %I, %I', inst.user_role, inst.admin_role);
    -- dblink opens connections with what it is given: nobody but the installer may call it here.
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_proc p ON p.oid = d.objid
              WHERE d.classid = 'pg_catalog.pg_proc'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'dblink') LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$grants$;

COMMENT ON TABLE dataenv.installation IS
    'This satellite installation''s identity (a UUID; with the database OID it names the installation), the protocol it speaks, its control database and its own roles.';
COMMENT ON TABLE dataenv.control_credentials IS
    'The login role and password with which this satellite files envelopes in the control database; readable by the installer only.';
COMMENT ON TABLE dataenv.request_kinds IS 'The request kinds this satellite offers, with their validator and policy (any or admin).';
COMMENT ON TABLE dataenv.requests IS
    'This satellite''s requests: written in the caller''s transaction, run by the control installation''s sidecar after it committed, outcomes written back here. Users see their own (RLS).';
COMMENT ON TRIGGER requests_send_envelope ON dataenv.requests IS
    'Deferred to commit: files each new request''s envelope in the control installation.';
COMMENT ON TRIGGER requests_send_cancellation ON dataenv.requests IS
    'Deferred to commit: passes the cancellation of a running request on to its envelope in the control installation.';
