-- Storages, lakes and the registry of fork lake namespaces (the cleanup ledger).
--
-- Storage credentials live in a table of their own that no role but the owner (the sidecar's
-- role) can read, like cluster passwords: no grant, no view, not in the publication.
CREATE TABLE dataenv.storages (
    name       text PRIMARY KEY,
    -- file:///absolute/dir or s3://bucket[/prefix], without a trailing slash
    url        text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE dataenv.storage_secrets (
    storage     text PRIMARY KEY REFERENCES dataenv.storages (name) ON DELETE CASCADE ON UPDATE CASCADE,
    -- endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style
    credentials jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON dataenv.storage_secrets FROM PUBLIC;

-- A workspace's lakes. A fork gets its own rows, copied from its parent's at fork creation and
-- stamped with fork_behavior (isolated or shared); NULL on a workspace that is not a fork.
-- No foreign key to the workspace: the workspaces table belongs to another area and a fork's
-- rows are removed by the lake cleanup of drop_fork.
CREATE TABLE dataenv.lakes (
    workspace        text NOT NULL,
    name             text NOT NULL,
    catalog_cluster  text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    catalog_database text NOT NULL,
    storage          text NOT NULL REFERENCES dataenv.storages (name) ON UPDATE CASCADE,
    -- relative to the storage url, without leading or trailing slash
    data_path        text NOT NULL,
    -- extra DuckLake ATTACH options: {"OPTION": value}
    extra_args       jsonb NOT NULL DEFAULT '{}'::jsonb,
    fork_behavior    text CHECK (fork_behavior IN ('isolated', 'shared')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, name)
);

-- The registry of fork lake namespaces: one row per physical location a fork ever attached
-- (catalog identity, storage identity, data path). It has no foreign key to the workspace on
-- purpose: a row outlives the workspace until its cleanup succeeded, and is deleted only then.
CREATE TABLE dataenv.fork_lake_namespaces (
    workspace        text NOT NULL,
    lake             text NOT NULL,
    metadata_schema  text NOT NULL,
    catalog_cluster  text NOT NULL,
    catalog_database text NOT NULL,
    storage          text NOT NULL,
    -- the storage url when the row was registered (the storage identity)
    storage_url      text NOT NULL,
    -- the fork's data prefix relative to the storage root: __dataenv_forks/<segment>/<data_path>
    data_path        text NOT NULL,
    -- set when the metadata schema is gone but the files are not yet deleted: a retry skips the
    -- schema phase. A new attach resets it (it recreates the schema).
    schema_dropped   boolean NOT NULL DEFAULT false,
    registered_at    timestamptz NOT NULL DEFAULT now(),
    last_attached_at timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    PRIMARY KEY (workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url, data_path)
);
CREATE INDEX fork_lake_namespaces_workspace_idx ON dataenv.fork_lake_namespaces (workspace);
