-- Workspace ownership and tombstones.
--
-- The owner of a workspace is its creator, dataenv.workspaces.created_by (immutable): only the
-- owner (or a member of the owner role) and dataenv administrators may drop a workspace, grant
-- and revoke its members.
--
-- A tombstone records a dropped workspace until nothing of it is left (fork copies, fork lake
-- namespaces, lake rows, materializations): who owned it (who may finish its cleanup), whether it
-- was a fork and of what. Its id cannot be created again while anything of it is left. The
-- tombstone is removed once the leftovers are gone (dataenv.bury_workspace).
CREATE TABLE dataenv.workspace_tombstones (
    id                 text PRIMARY KEY,
    -- NULL: not known (leftovers from before tombstones existed): administrators only
    owner              name,
    is_fork            boolean NOT NULL,
    parent             text,
    created_by_request uuid,
    dropped_at         timestamptz NOT NULL DEFAULT now()
);
