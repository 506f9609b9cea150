-- Which workspace roles may use which lake namespace (a metadata schema of a catalog database):
-- write for the workspace whose namespace it is (and a fork sharing it), read for the forks
-- below it that defer to it. The sidecar grants from these rows (schema privileges, table
-- privileges, default privileges between the roles that create tables there and those that read
-- them); a row goes with its workspace role.
CREATE TABLE dataenv.lake_namespace_access (
    catalog_cluster  text NOT NULL,
    catalog_database text NOT NULL,
    metadata_schema  text NOT NULL,
    workspace        text NOT NULL,
    access           text NOT NULL CHECK (access IN ('read', 'write')),
    granted_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (catalog_cluster, catalog_database, metadata_schema, workspace),
    FOREIGN KEY (catalog_cluster, workspace) REFERENCES dataenv.workspace_roles (cluster, workspace)
        ON DELETE CASCADE ON UPDATE CASCADE
);
