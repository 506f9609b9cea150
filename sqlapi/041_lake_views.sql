-- ---------------------------------------------------------------------------------------------
-- Reading storages and lakes (no secrets)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.storage_info AS
SELECT s.name,
       s.url,
       coalesce(sec.credentials <> '{}'::jsonb, false) AS has_credentials,
       s.created_at,
       s.updated_at
  FROM dataenv.storages s
  LEFT JOIN dataenv.storage_secrets sec ON sec.storage = s.name;
COMMENT ON VIEW dataenv.storage_info IS 'Registered storages without their credentials.';

CREATE OR REPLACE VIEW dataenv.lake_info WITH (security_barrier) AS
SELECT l.workspace, l.name, l.catalog_cluster, l.catalog_database, l.storage,
       s.url || '/' || l.data_path AS data_url, l.data_path, l.extra_args,
       coalesce(l.fork_behavior, 'root') AS fork_behavior, l.created_at, l.updated_at
  FROM dataenv.lakes l
  JOIN dataenv.storages s ON s.name = l.storage
 WHERE dataenv.can_use_workspace(l.workspace);
COMMENT ON VIEW dataenv.lake_info IS
    'Lakes of the workspaces the caller may use: catalog database, where the files live, extra ATTACH options, and for a fork whether the lake is isolated or shared.';

CREATE OR REPLACE VIEW dataenv.fork_lake_namespace_list WITH (security_barrier) AS
SELECT workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url,
       data_path, schema_dropped, registered_at, last_attached_at, last_error
  FROM dataenv.fork_lake_namespaces
 WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.fork_lake_namespace_list IS
    'The registry of fork lake namespaces (the cleanup ledger): one row per physical location a fork attached, deleted only after its metadata schema and data prefix were cleaned up.';
