-- What a workspace's members run first in their own DuckDB session (dataenv.duckdb_script): the
-- secrets and attaches of the workspace's lakes, computed by the sidecar (the same resolution as
-- a job's) whenever it prepares the workspace's connections (create_fork, prepare_connection,
-- and after an ancestor materializes a table). The passwords and storage keys are NOT stored
-- here: the script holds placeholders ({{pg_password:<cluster>}}, {{s3_credentials:<storage>}})
-- that duckdb_script fills in for a member at call time, so a rotation never leaves a stale
-- secret behind. Readable by the sidecar's role only.
CREATE TABLE dataenv.workspace_tool_scripts (
    workspace   text PRIMARY KEY REFERENCES dataenv.workspaces (id) ON DELETE CASCADE,
    script      text NOT NULL,
    -- the same as settings (a dbt-duckdb profile): {"extensions", "secrets": [{"name", "cluster",
    -- "host", "port", "user", "database"}], "attaches": [{"lake", "alias", "workspace",
    -- "read_only", "path", "options"}], "use"}, without passwords
    settings    jsonb NOT NULL DEFAULT '{}'::jsonb,
    prepared_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON dataenv.workspace_tool_scripts FROM PUBLIC;
