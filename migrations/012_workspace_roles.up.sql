-- Per-workspace managed roles: one role per (cluster, workspace) using that cluster, created and
-- converged by the sidecar (sidecar/internal/cluster/workspacerole.go). Jobs and the workspace's
-- members reach a cluster as this role, never as the cluster's admin.
--
-- No foreign key to the workspace: a row outlives the workspace until the role is dropped, so it
-- is also the ledger of what is left to clean. incarnation is the created_at of the workspace row
-- the role was made for: a workspace created again under the same id never inherits the role (or
-- the grants) of the earlier one.
CREATE TABLE dataenv.workspace_roles (
    cluster     text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    workspace   text NOT NULL,
    role        text NOT NULL CHECK (role LIKE 'dataenv\_ws\_%' AND octet_length(role) <= 63),
    -- the role's OID, recorded once it exists: a role of that name with another OID is not ours
    role_oid    oid,
    incarnation timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, workspace),
    UNIQUE (cluster, role)
);

-- The passwords of the workspace roles: readable by the sidecar's role only (no grant, no view,
-- not in the publication), like the cluster secrets. A new password is saved as pending before the
-- role gets it and promoted afterwards, so a crash in between converges on the next use.
CREATE TABLE dataenv.workspace_role_secrets (
    cluster          text NOT NULL,
    workspace        text NOT NULL,
    password         text,
    password_pending text,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, workspace),
    FOREIGN KEY (cluster, workspace) REFERENCES dataenv.workspace_roles (cluster, workspace)
        ON DELETE CASCADE ON UPDATE CASCADE
);
REVOKE ALL ON dataenv.workspace_role_secrets FROM PUBLIC;

-- Every database of the cluster in which the role was granted something (datatable access, a lake
-- namespace): where dropping the role revokes first (DROP OWNED BY in each).
CREATE TABLE dataenv.workspace_role_databases (
    cluster    text NOT NULL,
    workspace  text NOT NULL,
    database   text NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster, workspace, database),
    FOREIGN KEY (cluster, workspace) REFERENCES dataenv.workspace_roles (cluster, workspace)
        ON DELETE CASCADE ON UPDATE CASCADE
);

-- Workspace role names hash the installation id (names.WorkspaceRole): make sure it exists.
INSERT INTO dataenv.installation DEFAULT VALUES ON CONFLICT (singleton) DO NOTHING;
