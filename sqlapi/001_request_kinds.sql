-- The request table's API: validation and authorization at insert, cancel, wait, ping,
-- row-level security.
--
-- Registering a kind (each area's sqlapi file):
--     INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description) VALUES (...)
--     ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
--                                      workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;
-- policy is who may make it: any, admin, workspace_member or workspace_owner (the last two name
-- the argument that holds the workspace in workspace_arg). A kind without a policy is admin-only.


-- ---------------------------------------------------------------------------------------------
-- Authorization: one implementation, used at insert time and by the sidecar before every attempt
-- ---------------------------------------------------------------------------------------------

-- Administrators may make every request and use every workspace.
--
-- The helpers that every request insert and every authorization call (this one, may_ask_about,
-- the workspace access checks) are plpgsql: a SQL function with a SET clause is never inlined,
-- and before PostgreSQL 18 it is parsed and planned again at every statement that calls it
-- (about a quarter of a millisecond each here), where plpgsql keeps its plans for the session.
CREATE OR REPLACE FUNCTION dataenv.is_dataenv_admin(role name) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (
        SELECT FROM pg_catalog.pg_roles r
         WHERE r.rolname = role
           AND (r.rolsuper
                OR pg_catalog.pg_has_role(r.oid, 'dataenv_admin', 'MEMBER')
                OR pg_catalog.pg_has_role(r.oid, (SELECT n.nspowner FROM pg_catalog.pg_namespace n
                                                   WHERE n.nspname = 'dataenv'), 'MEMBER')));
END
$$;
COMMENT ON FUNCTION dataenv.is_dataenv_admin(name) IS
    'True for superusers, members of dataenv_admin and members of the dataenv schema''s owner (the sidecar''s role): the dataenv administrators.';

-- Functions that answer a question about a named role (may it use this workspace, may it make
-- this request) answer it only for the session's own roles, or for an administrator: otherwise
-- they would tell anyone which workspaces exist and who is in them. SECURITY DEFINER callers
-- cannot use current_user (it is their owner), so the check is on session_user.
CREATE OR REPLACE FUNCTION dataenv.may_ask_about(role name) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT FROM pg_catalog.pg_roles r
                    WHERE r.rolname = may_ask_about.role
                      AND pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER'))
        OR dataenv.is_dataenv_admin(session_user);
END
$$;
COMMENT ON FUNCTION dataenv.may_ask_about(name) IS
    'True when the session''s user is role (or a member of it) or a dataenv administrator: the only callers to whom dataenv answers questions about role''s rights.';

-- The policy of a kind applied to the role that made (or makes) a request. Raises 42501 with what
-- to do when the role may not; the workspace of a workspace policy is named only as the caller
-- gave it, so a refusal says nothing about whether it exists.
CREATE OR REPLACE FUNCTION dataenv.authorize_request(kind text, args jsonb, role name) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k record;
    ws text;
    access text;
BEGIN
    SELECT rk.policy, rk.workspace_arg INTO k FROM dataenv.request_kinds rk WHERE rk.kind = authorize_request.kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv request: unknown kind %', coalesce(to_json(kind)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'SELECT kind, description FROM dataenv.request_kinds lists the kinds.';
    END IF;
    IF role IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = role) THEN
        RAISE EXCEPTION '%: permission denied: requested_by % is not an existing role', kind, coalesce(to_json(role::text)::text, 'NULL')
            USING ERRCODE = '42501';
    END IF;
    IF NOT dataenv.may_ask_about(role) THEN
        RAISE EXCEPTION '%: permission denied: % may not make or check requests for %', kind, to_json(session_user::text)::text, to_json(role::text)::text
            USING ERRCODE = '42501', HINT = 'Make requests as yourself; only dataenv administrators set requested_by.';
    END IF;
    IF k.policy = 'satellite' THEN
        -- An envelope: the satellite authorized its request in its own database; here only a
        -- registered satellite's login role may have filed it (sqlapi/050_satellite_envelopes.sql).
        IF NOT EXISTS (SELECT FROM dataenv.satellites s WHERE s.login_role = role) THEN
            RAISE EXCEPTION '%: permission denied: % is not the login role of a registered satellite', kind, to_json(role::text)::text
                USING ERRCODE = '42501', HINT = 'Satellites file these through dataenv.satellite_enqueue_v1; install one with dataenv install --control-database.';
        END IF;
        RETURN;
    END IF;
    IF dataenv.is_dataenv_admin(role) THEN
        RETURN;
    END IF;
    IF NOT pg_catalog.pg_has_role(role, 'dataenv_user', 'MEMBER') THEN
        RAISE EXCEPTION '%: permission denied: % is not a dataenv user', kind, to_json(role::text)::text
            USING ERRCODE = '42501', HINT = format('An administrator grants it: GRANT dataenv_user TO %I;', role);
    END IF;
    IF k.policy = 'any' THEN
        RETURN;
    END IF;
    IF k.policy = 'admin' THEN
        RAISE EXCEPTION '%: permission denied: % is not a dataenv administrator (member of dataenv_admin)', kind, to_json(role::text)::text
            USING ERRCODE = '42501', HINT = 'Ask a dataenv administrator to make this request.';
    END IF;
    IF jsonb_typeof(args->k.workspace_arg) IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION '%: argument "%" (the workspace) is required and must be a string', kind, k.workspace_arg
            USING ERRCODE = '22023';
    END IF;
    ws := args->>k.workspace_arg;
    access := dataenv.workspace_access(ws, role);
    IF k.policy = 'workspace_member' AND access IS NULL THEN
        RAISE EXCEPTION '%: permission denied: % is not a member of workspace %', kind, to_json(role::text)::text, to_json(ws)::text
            USING ERRCODE = '42501', HINT = 'The workspace''s owner grants membership: SELECT dataenv.grant_workspace(workspace, role).';
    END IF;
    IF k.policy = 'workspace_owner' AND access IS DISTINCT FROM 'owner' AND access IS DISTINCT FROM 'admin' THEN
        RAISE EXCEPTION '%: permission denied: % is not the owner of workspace %', kind, to_json(role::text)::text, to_json(ws)::text
            USING ERRCODE = '42501', HINT = 'Only the workspace''s owner (its creator) or a dataenv administrator may do this.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.authorize_request(text, jsonb, name) IS
    'Raises (42501, with what to do) unless role may make a request of kind with args under the kind''s policy in dataenv.request_kinds (any, admin, workspace_member, workspace_owner, or satellite: a registered satellite''s login role). Checked at insert for requested_by, and by the sidecar before every attempt. Answers only for the session''s own roles, or for an administrator.';

REVOKE ALL ON FUNCTION dataenv.authorize_request(text, jsonb, name), dataenv.may_ask_about(name),
    dataenv.is_dataenv_admin(name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.authorize_request(text, jsonb, name), dataenv.may_ask_about(name),
    dataenv.is_dataenv_admin(name) TO dataenv_user, dataenv_admin;


-- Kinds every installation has (ping's validator is in sqlapi/shared/006: a satellite has it too).

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

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('ping', 'dataenv.validate_ping(jsonb)'::regprocedure, 'any', NULL, 'Does nothing; health checks and benchmarks.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;
