-- Workspaces, their members, their datatables, and the registry of fork copies.
--
-- A fork is a workspace with a parent. is_fork is set when the row is created and never changes;
-- parent is ON DELETE SET NULL, so a fork whose parent is gone is an orphaned fork, never a root.
-- Immutability, membership and the lifecycle lock are enforced by triggers and row-level security
-- in sqlapi/020_workspaces.sql.
CREATE TABLE dataenv.workspaces (
    -- lowercase ASCII letters, digits, '_', '-', '.', and '/' between segments (git-branch-like)
    id                 text PRIMARY KEY
                       CHECK (octet_length(id) <= 63 AND id ~ '^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*$'),
    is_fork            boolean NOT NULL DEFAULT false,
    parent             text REFERENCES dataenv.workspaces (id) ON DELETE SET NULL,
    -- lakes this fork shares with its parent (never inherited by sub-forks); '{}' for a root
    shared_lakes       text[] NOT NULL DEFAULT '{}',
    created_by         name NOT NULL DEFAULT current_user,
    -- the create_fork request that made a fork (NULL for a workspace made by create_workspace)
    created_by_request uuid,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (is_fork OR parent IS NULL),
    CHECK (is_fork = (created_by_request IS NOT NULL)),
    CHECK (parent IS DISTINCT FROM id)
);
CREATE INDEX workspaces_parent_idx ON dataenv.workspaces (parent);

-- Which database roles may use a workspace: a role is a member when it is (or is a member of)
-- one of the workspace's member roles. The creator is added when the workspace is created.
CREATE TABLE dataenv.workspace_members (
    workspace  text NOT NULL REFERENCES dataenv.workspaces (id) ON DELETE CASCADE ON UPDATE CASCADE,
    member     name NOT NULL,
    granted_by name NOT NULL DEFAULT current_user,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, member)
);

-- A workspace's datatables: a name bound to a database of a cluster. source says where the row
-- comes from: configured (add_datatable), or the mode a fork was created with. A keep_original
-- row of a fork records the database its parent resolved to at fork time: resolution follows the
-- parent while it has the datatable and falls back to this row when it does not (orphaned fork).
CREATE TABLE dataenv.datatables (
    workspace  text NOT NULL REFERENCES dataenv.workspaces (id) ON DELETE CASCADE ON UPDATE CASCADE,
    name       text NOT NULL CHECK (octet_length(name) <= 63 AND name ~ '^[a-z][a-z0-9_]*$'),
    cluster    text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    database   text NOT NULL CHECK (octet_length(database) BETWEEN 1 AND 63),
    source     text NOT NULL DEFAULT 'configured'
               CHECK (source IN ('configured', 'keep_original', 'schema_only', 'full_copy')),
    created_by name NOT NULL DEFAULT current_user,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace, name)
);
CREATE INDEX datatables_database_idx ON dataenv.datatables (cluster, database);

-- The registry of fork copies: every database create_fork made (or is making) for a workspace.
-- It is the cleanup ledger: deliberately no foreign key to the workspace, so a row outlives the
-- workspace until the copy's drop succeeded, and is deleted only then. The workspace a copy was
-- made for is what authorizes its use: the database name is not an authorization.
CREATE TABLE dataenv.fork_copies (
    cluster            text NOT NULL REFERENCES dataenv.clusters (name) ON UPDATE CASCADE,
    database           text NOT NULL CHECK (database LIKE 'dataenv\_fork\_%'),
    workspace          text NOT NULL,
    datatable          text NOT NULL,
    mode               text NOT NULL CHECK (mode IN ('schema_only', 'full_copy')),
    parent_database    text NOT NULL,
    -- template (CREATE DATABASE ... TEMPLATE) or dump (pg_dump, then psql or pg_restore)
    method             text CHECK (method IN ('template', 'dump')),
    -- creating: the database may be missing, partial or complete; ready: complete
    state              text NOT NULL DEFAULT 'creating' CHECK (state IN ('creating', 'ready')),
    created_by_request uuid NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    ready_at           timestamptz,
    PRIMARY KEY (cluster, database)
);
CREATE INDEX fork_copies_workspace_idx ON dataenv.fork_copies (workspace);
