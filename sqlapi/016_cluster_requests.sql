-- ---------------------------------------------------------------------------------------------
-- Request functions (SECURITY INVOKER: the request is the caller's)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.setup_cluster(cluster text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('setup_cluster', jsonb_build_object('cluster', cluster)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.setup_cluster(text) IS
    'Requests the setup of a cluster: the managed application and replication roles, each with dataenv''s marker (roles without it are refused, never taken over). The result reports each step. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.create_database(cluster text, name text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_database', jsonb_build_object('cluster', cluster, 'name', name)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_database(text, text) IS
    'Requests a new database on a set-up cluster, owned by the managed application user, marked and recorded as dataenv''s. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.drop_database(cluster text, name text, terminate_sessions boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_database', jsonb_build_object('cluster', cluster, 'name', name,
                                                'terminate_sessions', coalesce(terminate_sessions, false))) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_database(text, text, boolean) IS
    'Requests the drop of a database dataenv created (marker and record both needed). Refused while dataenv.managed_database_uses lists anything; refused while sessions are connected unless terminate_sessions, which ends them. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.create_datatable_role(cluster text, role text, description text DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_datatable_role', jsonb_strip_nulls(jsonb_build_object('cluster', cluster, 'role', role,
                                                                          'description', description))) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_datatable_role(text, text, text) IS
    'Requests a datatable role on a set-up cluster: NOLOGIN, granted to the managed application user, with dataenv''s marker. Role names are unique per cluster. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.drop_datatable_role(cluster text, role text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_datatable_role', jsonb_build_object('cluster', cluster, 'role', role)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_datatable_role(text, text) IS
    'Requests the drop of a datatable role dataenv created on a cluster. Returns the request id.';
