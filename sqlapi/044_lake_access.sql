-- Lake namespace access of the workspace roles (migrations/041_lake_namespace_access.up.sql):
-- written and read by the sidecar only; admins see it.

CREATE OR REPLACE VIEW dataenv.lake_namespace_access_list AS
SELECT catalog_cluster, catalog_database, metadata_schema, workspace, access, granted_at
  FROM dataenv.lake_namespace_access;
COMMENT ON VIEW dataenv.lake_namespace_access_list IS
    'Which workspace role may read or write which lake metadata schema (write: the workspace''s own namespace; read: an ancestor''s it defers to).';

REVOKE ALL ON dataenv.lake_namespace_access, dataenv.lake_namespace_access_list FROM PUBLIC;
GRANT SELECT ON dataenv.lake_namespace_access_list TO dataenv_admin;
