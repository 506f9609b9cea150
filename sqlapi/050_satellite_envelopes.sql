-- The control side of satellite installations (docs/satellites.md): the readiness protocol, the
-- envelope a satellite files for each of its requests, and what satellites may read of the
-- control installation. Registrations are in dataenv.satellites (migrations/050_satellites.up.sql).

-- The readiness protocol versions this control installation serves. A satellite speaks one
-- version; install refuses a pair whose versions do not overlap, whatever their release strings.
-- A control that moves to protocol 2 keeps serving 1 (its envelope function stays) until no
-- satellite of version 1 is left, so the control is upgraded first and satellites later.
CREATE OR REPLACE FUNCTION dataenv.satellite_protocols(OUT min_version integer, OUT max_version integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT 1, 1 $$;
COMMENT ON FUNCTION dataenv.satellite_protocols() IS
    'The range of satellite readiness protocol versions this control installation serves: a satellite is installed only when its own version is in it.';

-- The registration of the session's user, when it is a satellite's login role. session_user,
-- not current_user: the callers are SECURITY DEFINER functions.
CREATE OR REPLACE FUNCTION dataenv.satellite_of_session() RETURNS dataenv.satellites
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s dataenv.satellites;
BEGIN
    SELECT * INTO s FROM dataenv.satellites WHERE login_role = session_user;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv satellite: % is not the login role of a registered satellite', to_json(session_user::text)::text
            USING ERRCODE = '42501',
                  HINT = 'Only a satellite installation reaches this; install one with dataenv install --dsn <database> --control-database <this database>.';
    END IF;
    RETURN s;
END
$$;
COMMENT ON FUNCTION dataenv.satellite_of_session() IS
    'The satellite registration whose login role is the session''s user; raises 42501 for any other session.';

-- Validator of kind 'satellite': the origin in args must be the registration of the session
-- that inserts it, so not even an administrator can file an envelope for another origin.
CREATE OR REPLACE FUNCTION dataenv.validate_satellite(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s dataenv.satellites := dataenv.satellite_of_session();
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF k NOT IN ('database_oid', 'installation_id', 'request_id', 'xact', 'protocol', 'kind', 'requested_by', 'workspace') THEN
            RAISE EXCEPTION 'satellite: unknown argument "%"', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF (args->>'database_oid')::oid IS DISTINCT FROM s.database_oid
       OR (args->>'installation_id')::uuid IS DISTINCT FROM s.installation_id THEN
        RAISE EXCEPTION 'satellite: the origin in args is not the registration of %', to_json(session_user::text)::text
            USING ERRCODE = '42501', HINT = 'File envelopes with dataenv.satellite_enqueue_v1, which derives the origin.';
    END IF;
    IF jsonb_typeof(args->'request_id') IS DISTINCT FROM 'string' OR jsonb_typeof(args->'xact') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'satellite: request_id and xact are required strings' USING ERRCODE = '22023';
    END IF;
    -- The kind only tells the dispatcher which workers run the envelope; the sidecar still
    -- refuses one whose origin row has another kind.
    IF jsonb_typeof(args->'kind') IS DISTINCT FROM 'string' OR args->>'kind' = 'satellite'
       OR NOT EXISTS (SELECT FROM dataenv.request_kinds rk WHERE rk.kind = args->>'kind') THEN
        RAISE EXCEPTION 'satellite: kind % is not a request kind of the control installation', coalesce(args->'kind', 'null'::jsonb)::text
            USING ERRCODE = '22023', HINT = 'Pass the satellite row''s kind (ping, run, ...) to dataenv.satellite_enqueue_v1.';
    END IF;
    -- Who and where a job counts against (the dispatcher's caps): hints as well, checked
    -- against the row like the kind.
    IF jsonb_typeof(args->'requested_by') IS DISTINCT FROM 'string' OR args->>'requested_by' = ''
       OR octet_length(args->>'requested_by') > 63 THEN
        RAISE EXCEPTION 'satellite: requested_by % is not a role name', coalesce(args->'requested_by', 'null'::jsonb)::text
            USING ERRCODE = '22023', HINT = 'Pass the satellite row''s requested_by to dataenv.satellite_enqueue_v1.';
    END IF;
    IF args ? 'workspace' AND (jsonb_typeof(args->'workspace') IS DISTINCT FROM 'string' OR args->>'workspace' = ''
                                OR octet_length(args->>'workspace') > 63) THEN
        RAISE EXCEPTION 'satellite: workspace % is not a workspace name', (args->'workspace')::text
            USING ERRCODE = '22023', HINT = 'Pass the satellite row''s args->>''workspace'' (NULL when it has none) to dataenv.satellite_enqueue_v1.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_satellite(jsonb) IS
    'Validates the args of an envelope (kind satellite): the origin must be the inserting session''s own satellite registration, kind a request kind of the control (other than satellite), requested_by a role name and workspace, when present, a workspace name.';

-- The envelope: the satellite's commit-time trigger calls this over dblink as the satellite's
-- login role, in a transaction of its own that commits just before the origin's does (so it
-- can outlive a rollback: the sidecar checks the origin transaction before running it). The id is
-- the satellite row's own, which keeps request ids unique across installations. The row's kind,
-- requester and workspace ride along as scheduling hints: the dispatcher classes the envelope by
-- the kind (a run is a job, a ping control-plane) and counts a job against the requester (within
-- its satellite) and the workspace; the sidecar refuses an envelope whose hints are not its row's.
-- Satellites are unreleased, so protocol 1 dropped its earlier forms.
DROP FUNCTION IF EXISTS dataenv.satellite_enqueue_v1(uuid, xid8);
DROP FUNCTION IF EXISTS dataenv.satellite_enqueue_v1(uuid, xid8, text);
CREATE OR REPLACE FUNCTION dataenv.satellite_enqueue_v1(request_id uuid, origin_xact xid8, kind text,
                                                        requested_by name, workspace text)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s dataenv.satellites := dataenv.satellite_of_session();
    envelope jsonb;
    existing jsonb;
BEGIN
    IF request_id IS NULL OR origin_xact IS NULL OR kind IS NULL OR requested_by IS NULL THEN
        RAISE EXCEPTION 'dataenv.satellite_enqueue_v1: request_id, origin_xact, kind and requested_by are required' USING ERRCODE = '22004';
    END IF;
    envelope := jsonb_build_object('database_oid', s.database_oid::text, 'installation_id', s.installation_id,
                                   'request_id', request_id, 'xact', origin_xact::text, 'protocol', 1, 'kind', kind,
                                   'requested_by', requested_by::text);
    IF workspace IS NOT NULL THEN
        envelope := envelope || jsonb_build_object('workspace', workspace);
    END IF;
    INSERT INTO dataenv.requests (id, kind, args, requested_by)
    VALUES (request_id, 'satellite', envelope, session_user)
    ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        -- The same envelope again (an answer lost on the way back) is fine; another one is not.
        SELECT r.args INTO existing FROM dataenv.requests r WHERE r.id = request_id;
        IF existing IS DISTINCT FROM envelope THEN
            RAISE EXCEPTION 'dataenv satellite: request id % is already taken in the control installation', request_id
                USING ERRCODE = '23505', HINT = 'Make the request again: it gets a new id.';
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.satellite_enqueue_v1(uuid, xid8, text, name, text) IS
    'Files the envelope of a satellite request (protocol 1): origin database OID and installation UUID derived from the calling login role''s registration, the local request id, the origin transaction id, and the row''s kind, requester and workspace (scheduling hints the sidecar checks against the row). Idempotent for the same envelope.';

-- A cancellation made in a satellite of a request already running there: its envelope is
-- cancelled like any request (the sidecar stops the running job), but only an envelope of the
-- calling login role's own satellite. True when a cancellation was recorded now.
CREATE OR REPLACE FUNCTION dataenv.satellite_cancel_v1(request_id uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s dataenv.satellites := dataenv.satellite_of_session();
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.satellite_cancel_v1: request_id is required' USING ERRCODE = '22004';
    END IF;
    UPDATE dataenv.requests r SET cancel_requested = true
     WHERE r.id = request_id AND r.kind = 'satellite' AND r.requested_by = s.login_role
       AND r.status IN ('pending', 'running') AND NOT r.cancel_requested;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION dataenv.satellite_cancel_v1(uuid) IS
    'For a satellite''s login role: cancels the envelope of one of that satellite''s requests (a running job is stopped); envelopes of other satellites are left alone. True when a cancellation was recorded.';

-- What a satellite shows as its dataenv.sidecar_status: the engine's state, no other
-- installation's rows.
CREATE OR REPLACE FUNCTION dataenv.satellite_status_v1()
RETURNS TABLE (leader_ready boolean, heartbeat_age interval, schema_version integer,
               protocol_min integer, protocol_max integer, envelopes_waiting bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s dataenv.satellites := dataenv.satellite_of_session();
BEGIN
    RETURN QUERY
    SELECT coalesce(bool_or(st.ready AND st.leader), false),
           min(st.heartbeat_age),
           (SELECT max(m.version) FROM dataenv.schema_migrations m),
           (dataenv.satellite_protocols()).min_version,
           (dataenv.satellite_protocols()).max_version,
           (SELECT count(*) FROM dataenv.requests r
             WHERE r.kind = 'satellite' AND r.status IN ('pending', 'running') AND r.requested_by = s.login_role)
      FROM dataenv.sidecar_status st;
END
$$;
COMMENT ON FUNCTION dataenv.satellite_status_v1() IS
    'For a satellite''s login role: whether a ready leader sidecar serves the engine, its heartbeat age, the control schema version, the protocols served and this satellite''s envelopes still waiting.';

REVOKE ALL ON FUNCTION dataenv.satellite_protocols(), dataenv.satellite_of_session(), dataenv.validate_satellite(jsonb),
    dataenv.satellite_enqueue_v1(uuid, xid8, text, name, text), dataenv.satellite_status_v1(), dataenv.satellite_cancel_v1(uuid) FROM PUBLIC;
-- Satellites registered before these functions (or signatures) existed may call them too.
DO $grants$
DECLARE
    r name;
BEGIN
    FOR r IN SELECT s.login_role FROM dataenv.satellites s
              WHERE EXISTS (SELECT FROM pg_catalog.pg_roles x WHERE x.rolname = s.login_role) LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION dataenv.satellite_cancel_v1(uuid), dataenv.satellite_enqueue_v1(uuid, xid8, text, name, text) TO %I', r);
    END LOOP;
END
$grants$;
REVOKE ALL ON dataenv.satellites FROM PUBLIC;
GRANT SELECT ON dataenv.satellites TO dataenv_admin;

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('satellite', 'dataenv.validate_satellite(jsonb)'::regprocedure, 'satellite', NULL,
        'The envelope of a request made in a satellite installation (filed by the satellite, run against its origin database).')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

COMMENT ON TABLE dataenv.satellites IS
    'Satellite installations registered with this control installation (docs/satellites.md): one row per installation, written by dataenv install --control-database, removed by its uninstall.';
COMMENT ON COLUMN dataenv.satellites.installation_id IS 'The satellite''s dataenv.installation.id: with database_oid, its identity; a re-created satellite has a new one.';
COMMENT ON COLUMN dataenv.satellites.database_oid IS 'OID of the satellite''s database; the sidecar resolves the database by it, so a rename is followed and a replacement fenced.';
COMMENT ON COLUMN dataenv.satellites.database_name IS 'The database''s name at install, for people and error messages.';
COMMENT ON COLUMN dataenv.satellites.login_role IS 'The satellite''s login role here: its only rights are to file envelopes (satellite_enqueue_v1), cancel its own (satellite_cancel_v1) and read satellite_status_v1.';
COMMENT ON COLUMN dataenv.satellites.protocol IS 'The readiness protocol version the satellite speaks.';
COMMENT ON COLUMN dataenv.sidecars.satellite_connections_open IS 'Connections from this sidecar to satellite databases open (in use or idle), at its last heartbeat.';
COMMENT ON COLUMN dataenv.sidecars.satellite_connections_in_use IS 'Connections from this sidecar to satellite databases running an envelope, at its last heartbeat.';
