-- ---------------------------------------------------------------------------------------------
-- Checks at registration time, and administrator-only functions that say so
-- ---------------------------------------------------------------------------------------------

-- Administrator-only SECURITY DEFINER functions (register_cluster, add_storage, add_lake, ...) are
-- executable by dataenv_user and start with this check, so that a caller without the role is told
-- which role it needs instead of PostgreSQL's "permission denied for function". Inside a definer
-- function current_user is the owner, so the caller is the role the session acts as: the SET ROLE
-- role when one is set, else session_user (the convention: authorization in a definer function
-- checks session_user).
CREATE OR REPLACE FUNCTION dataenv.acting_role() RETURNS name
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN pg_catalog.current_setting('role') IN ('none', '') THEN session_user
                ELSE pg_catalog.current_setting('role')::name END
$$;
COMMENT ON FUNCTION dataenv.acting_role() IS
    'The role the session acts as (the SET ROLE role, else session_user): the caller, inside a SECURITY DEFINER function.';

CREATE OR REPLACE FUNCTION dataenv.require_admin_caller(fn text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    caller name := dataenv.acting_role();
BEGIN
    IF NOT dataenv.is_dataenv_admin(caller) THEN
        RAISE EXCEPTION '%: % is not a dataenv administrator (a member of dataenv_admin)', fn, caller
            USING ERRCODE = '42501',
                  DETAIL = 'Clusters, storages and lakes are configured by members of dataenv_admin.',
                  HINT = format('An administrator grants it: GRANT dataenv_admin TO %I;', caller);
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_admin_caller(text) IS
    'Internal: raises, naming fn and the role dataenv_admin, unless the role the session acts as is a dataenv administrator.';

-- A connection to a cluster is made by the sidecar (its network, its TLS settings), never by the
-- database server: the server may not reach the hosts the sidecar reaches, and SQL cannot wait
-- for the sidecar inside the transaction that saves a registration (the sidecar sees it only
-- once committed). So the check is a request of its own: register_cluster makes one and returns
-- its id, and check_cluster makes one at any time (after update_cluster, or for a cluster that
-- was not reachable when it was registered).
CREATE OR REPLACE FUNCTION dataenv.validate_check_cluster(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.require_dataenv_admin('check_cluster');
    PERFORM dataenv.check_request_keys('check_cluster', args, ARRAY['cluster']);
    PERFORM dataenv.require_cluster('check_cluster', args->>'cluster');
END
$$;
COMMENT ON FUNCTION dataenv.validate_check_cluster(jsonb) IS 'Validates the args of a check_cluster request.';

CREATE OR REPLACE FUNCTION dataenv.check_cluster(cluster text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('check_cluster', jsonb_build_object('cluster', cluster)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.check_cluster(text) IS
    'Requests a connection check of a registered cluster: the sidecar connects as its admin_user with its TLS settings and reports the server version and the admin''s attributes, or what to fix. Changes nothing. Returns the request id.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('check_cluster', 'dataenv.validate_check_cluster(jsonb)'::regprocedure, 'admin', NULL,
        'Connects to a registered cluster as its admin and reports what setup_cluster will find (or what to fix); changes nothing.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

REVOKE ALL ON FUNCTION dataenv.acting_role(), dataenv.require_admin_caller(text), dataenv.check_cluster(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.acting_role(), dataenv.require_admin_caller(text), dataenv.check_cluster(text)
  TO dataenv_user, dataenv_admin;
