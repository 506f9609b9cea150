-- ---------------------------------------------------------------------------------------------
-- Reading storages and lakes (no secrets)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.storage_info AS
SELECT s.name,
       s.url,
       coalesce(sec.credentials <> '{}'::jsonb, false) AS has_credentials,
       s.created_at,
       s.updated_at,
       coalesce(sec.credentials ? 'read_only_access_key_id', false) AS has_read_only_keys
  FROM dataenv.storages s
  LEFT JOIN dataenv.storage_secrets sec ON sec.storage = s.name;
COMMENT ON VIEW dataenv.storage_info IS
    'Registered storages without their credentials; has_read_only_keys: jobs read with read-only keys and write only their own namespaces (a fork cannot write its ancestors'' files).';

CREATE OR REPLACE VIEW dataenv.lake_info WITH (security_barrier) AS
SELECT l.workspace, l.name, l.catalog_cluster, l.catalog_database, l.storage,
       CASE WHEN l.fork_behavior = 'isolated' THEN r.storage_url || '/' || pg_catalog.rtrim(r.data_path, '/')
            ELSE s.url || '/' || l.data_path END AS data_url,
       l.data_path, l.extra_args,
       coalesce(l.fork_behavior, 'root') AS fork_behavior, l.created_at, l.updated_at,
       CASE WHEN l.fork_behavior = 'isolated' THEN r.metadata_schema
            ELSE coalesce(l.extra_args->>'METADATA_SCHEMA', 'public') END AS metadata_schema
  FROM dataenv.lakes l
  JOIN dataenv.storages s ON s.name = l.storage
  LEFT JOIN LATERAL (SELECT n.storage_url, n.data_path, n.metadata_schema FROM dataenv.fork_lake_namespaces n
                      WHERE n.workspace = l.workspace AND n.lake = l.name AND NOT n.schema_dropped
                      ORDER BY n.last_attached_at DESC NULLS LAST LIMIT 1) r ON l.fork_behavior = 'isolated'
 WHERE dataenv.can_use_workspace(l.workspace);
COMMENT ON VIEW dataenv.lake_info IS
    'Lakes of the workspaces the caller may use: catalog database, where the workspace''s own files live (data_url: for an isolated fork its prefix under __dataenv_forks/, once create_fork made its namespace) and its metadata_schema, extra ATTACH options, and for a fork whether the lake is isolated or shared.';

CREATE OR REPLACE VIEW dataenv.fork_lake_namespace_list WITH (security_barrier) AS
SELECT workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url,
       data_path, schema_dropped, registered_at, last_attached_at, last_error
  FROM dataenv.fork_lake_namespaces
 WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.fork_lake_namespace_list IS
    'The registry of fork lake namespaces (the cleanup ledger): one row per physical location a fork attached, deleted only after its metadata schema and data prefix were cleaned up.';
