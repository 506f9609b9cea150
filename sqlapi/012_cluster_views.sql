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

CREATE OR REPLACE VIEW dataenv.managed_database_list AS
SELECT cluster, name, created_by_request, for_workspace, template, created_at
  FROM dataenv.managed_databases;
COMMENT ON VIEW dataenv.managed_database_list IS 'Databases dataenv created, per cluster (the authoritative ownership record).';

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
