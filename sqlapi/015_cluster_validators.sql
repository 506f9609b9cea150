-- ---------------------------------------------------------------------------------------------
-- Request kinds: validators
-- ---------------------------------------------------------------------------------------------

-- Cluster requests change what exists on clusters: only dataenv administrators may make them
-- (policy admin in dataenv.request_kinds, enforced by dataenv.authorize_request at insert time
-- and by the sidecar before every attempt). The validators refuse early with the same rule.

-- Internal: raises unless the current user may make cluster requests.
CREATE OR REPLACE FUNCTION dataenv.require_dataenv_admin(kind text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT dataenv.is_dataenv_admin(current_user) THEN
        RAISE EXCEPTION '%: permission denied: cluster requests need membership in dataenv_admin', kind
            USING ERRCODE = '42501';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_dataenv_admin(text) IS 'Internal: raises unless the current user is a dataenv administrator.';

-- Internal: raises on keys outside allowed and on missing or non-string required keys.
CREATE OR REPLACE FUNCTION dataenv.check_request_keys(kind text, args jsonb, required text[], optional text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF NOT (k = ANY (required) OR k = ANY (optional)) THEN
            RAISE EXCEPTION '%: unknown argument "%"', kind, k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    FOREACH k IN ARRAY required LOOP
        IF jsonb_typeof(args->k) IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION '%: argument "%" is required and must be a string', kind, k USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.check_request_keys(text, jsonb, text[], text[]) IS
    'Internal: validates the keys of a request''s args.';

-- Internal: raises unless setup succeeded on the cluster's current host:port.
CREATE OR REPLACE FUNCTION dataenv.check_cluster_ready(fn text, c dataenv.clusters) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF c.set_up_for IS DISTINCT FROM c.host || ':' || c.port THEN
        RAISE EXCEPTION '%: cluster % is not set up for %:% (set up for %)', fn, to_json(c.name)::text, c.host, c.port,
            coalesce(c.set_up_for, 'nothing yet')
            USING ERRCODE = '55000', HINT = format('Run SELECT dataenv.setup_cluster(%L) and wait for it to succeed.', c.name);
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_cluster_ready(text, dataenv.clusters) IS
    'Internal: raises unless the last successful setup of the cluster was for its current host:port.';

CREATE OR REPLACE FUNCTION dataenv.validate_setup_cluster(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.require_dataenv_admin('setup_cluster');
    PERFORM dataenv.check_request_keys('setup_cluster', args, ARRAY['cluster']);
    PERFORM dataenv.require_cluster('setup_cluster', args->>'cluster');
END
$$;
COMMENT ON FUNCTION dataenv.validate_setup_cluster(jsonb) IS 'Validates the args of a setup_cluster request.';

CREATE OR REPLACE FUNCTION dataenv.validate_create_database(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('create_database');
    PERFORM dataenv.check_request_keys('create_database', args, ARRAY['cluster', 'name']);
    c := dataenv.require_cluster('create_database', args->>'cluster');
    PERFORM dataenv.check_name('database', args->>'name');
    PERFORM dataenv.check_cluster_ready('create_database', c);
    IF EXISTS (SELECT FROM dataenv.managed_database_list d WHERE d.cluster = c.name AND d.name = args->>'name') THEN
        RAISE EXCEPTION 'create_database: database % already exists on cluster %', to_json(args->>'name')::text, to_json(c.name)::text
            USING ERRCODE = '42P04';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_create_database(jsonb) IS 'Validates the args of a create_database request.';

CREATE OR REPLACE FUNCTION dataenv.validate_drop_database(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('drop_database');
    PERFORM dataenv.check_request_keys('drop_database', args, ARRAY['cluster', 'name'], ARRAY['terminate_sessions']);
    c := dataenv.require_cluster('drop_database', args->>'cluster');
    PERFORM dataenv.check_name('database', args->>'name');
    IF args ? 'terminate_sessions' AND jsonb_typeof(args->'terminate_sessions') <> 'boolean' THEN
        RAISE EXCEPTION 'drop_database: terminate_sessions must be a boolean' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM dataenv.managed_database_list d WHERE d.cluster = c.name AND d.name = args->>'name') THEN
        RAISE EXCEPTION 'drop_database: database % on cluster % was not created by dataenv', to_json(args->>'name')::text, to_json(c.name)::text
            USING ERRCODE = '42501', DETAIL = 'dataenv drops only databases recorded in dataenv.managed_database_list.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_drop_database(jsonb) IS 'Validates the args of a drop_database request.';

CREATE OR REPLACE FUNCTION dataenv.validate_create_datatable_role(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('create_datatable_role');
    PERFORM dataenv.check_request_keys('create_datatable_role', args, ARRAY['cluster', 'role'], ARRAY['description']);
    c := dataenv.require_cluster('create_datatable_role', args->>'cluster');
    PERFORM dataenv.check_name('role', args->>'role');
    IF args ? 'description' AND jsonb_typeof(args->'description') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'create_datatable_role: description must be a string' USING ERRCODE = '22023';
    END IF;
    IF octet_length(args->>'description') > 1000 THEN
        RAISE EXCEPTION 'create_datatable_role: description is longer than 1000 bytes' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_cluster_ready('create_datatable_role', c);
    IF EXISTS (SELECT FROM dataenv.datatable_role_list r WHERE r.cluster = c.name AND r.role = args->>'role') THEN
        RAISE EXCEPTION 'create_datatable_role: role % already exists on cluster %', to_json(args->>'role')::text, to_json(c.name)::text
            USING ERRCODE = '42710';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_create_datatable_role(jsonb) IS 'Validates the args of a create_datatable_role request.';

CREATE OR REPLACE FUNCTION dataenv.validate_drop_datatable_role(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('drop_datatable_role');
    PERFORM dataenv.check_request_keys('drop_datatable_role', args, ARRAY['cluster', 'role']);
    c := dataenv.require_cluster('drop_datatable_role', args->>'cluster');
    PERFORM dataenv.check_name('role', args->>'role');
    IF NOT EXISTS (SELECT FROM dataenv.datatable_role_list r WHERE r.cluster = c.name AND r.role = args->>'role') THEN
        RAISE EXCEPTION 'drop_datatable_role: role % on cluster % was not created by dataenv', to_json(args->>'role')::text, to_json(c.name)::text
            USING ERRCODE = '42501';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_drop_datatable_role(jsonb) IS 'Validates the args of a drop_datatable_role request.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description) VALUES
    ('setup_cluster', 'dataenv.validate_setup_cluster(jsonb)'::regprocedure, 'admin', NULL,
     'Converges the managed roles of a cluster and records the host:port it was set up for.'),
    ('create_database', 'dataenv.validate_create_database(jsonb)'::regprocedure, 'admin', NULL,
     'Creates a database owned by the managed application user, with dataenv''s marker and record.'),
    ('drop_database', 'dataenv.validate_drop_database(jsonb)'::regprocedure, 'admin', NULL,
     'Drops a database dataenv created, once nothing uses it.'),
    ('create_datatable_role', 'dataenv.validate_create_datatable_role(jsonb)'::regprocedure, 'admin', NULL,
     'Creates a datatable role on a cluster, with dataenv''s marker.'),
    ('drop_datatable_role', 'dataenv.validate_drop_datatable_role(jsonb)'::regprocedure, 'admin', NULL,
     'Drops a datatable role dataenv created.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;
