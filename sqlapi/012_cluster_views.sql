-- ---------------------------------------------------------------------------------------------
-- Reading clusters (no secrets)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.cluster_info AS
SELECT c.name,
       c.kind,
       c.host,
       c.port,
       c.admin_user,
       c.sslmode,
       c.root_certificate_pem IS NOT NULL AS has_root_certificate,
       c.app_role,
       c.replication_role,
       c.set_up_for,
       c.set_up_at,
       c.set_up_for IS NOT DISTINCT FROM (c.host || ':' || c.port) AS ready,
       c.created_at,
       c.updated_at
  FROM dataenv.clusters c;
COMMENT ON VIEW dataenv.cluster_info IS
    'Registered clusters without their secrets; ready means setup succeeded on the current host:port.';

-- Administrators see every record; a user sees the fork copies of workspaces it may use and the
-- databases granted to it for binding, never another tenant's workspace ids. (plpgsql: the
-- functions it calls are defined by later files.)
CREATE OR REPLACE FUNCTION dataenv.may_see_managed_database(cluster text, name text, for_workspace text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dataenv.is_dataenv_admin(current_user) THEN
        RETURN true;
    END IF;
    IF for_workspace IS NOT NULL THEN
        RETURN dataenv.can_use_workspace(for_workspace);
    END IF;
    RETURN dataenv.may_bind(cluster, name, current_user);
END
$$;
COMMENT ON FUNCTION dataenv.may_see_managed_database(text, text, text) IS
    'Internal: whether the current role sees a managed database record: administrators all; users the fork copies of workspaces they may use and databases granted to them.';

CREATE OR REPLACE VIEW dataenv.managed_database_list WITH (security_barrier) AS
SELECT d.cluster, d.name, d.created_by_request, d.for_workspace, d.template, d.created_at, d.database_oid, d.owner_oid
  FROM dataenv.managed_databases d
 WHERE dataenv.may_see_managed_database(d.cluster, d.name, d.for_workspace);
COMMENT ON VIEW dataenv.managed_database_list IS
    'Databases dataenv created, per cluster (the authoritative ownership record, with the OID and owner recorded at creation): all for administrators; for users, the fork copies of workspaces they may use and the databases granted to them.';

CREATE OR REPLACE VIEW dataenv.datatable_role_list AS
SELECT cluster, role, description, created_by_request, created_at
  FROM dataenv.datatable_roles;
COMMENT ON VIEW dataenv.datatable_role_list IS 'Datatable roles dataenv created, per cluster.';

-- Internal: the cluster row or a clear error.
CREATE OR REPLACE FUNCTION dataenv.require_cluster(fn text, cluster text) RETURNS dataenv.clusters
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    IF cluster IS NULL OR cluster = '' THEN
        RAISE EXCEPTION '%: cluster is required', fn USING ERRCODE = '22023';
    END IF;
    SELECT * INTO c FROM dataenv.clusters WHERE name = cluster;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no cluster named %', fn, to_json(cluster)::text
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.cluster_info lists the clusters.';
    END IF;
    RETURN c;
END
$$;
COMMENT ON FUNCTION dataenv.require_cluster(text, text) IS 'Internal: returns the cluster row or raises a clear error naming fn.';
