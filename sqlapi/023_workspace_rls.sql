-- ---------------------------------------------------------------------------------------------
-- Row-level security
-- ---------------------------------------------------------------------------------------------

ALTER TABLE dataenv.workspaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE dataenv.workspace_members ENABLE ROW LEVEL SECURITY;
ALTER TABLE dataenv.datatables ENABLE ROW LEVEL SECURITY;
ALTER TABLE dataenv.fork_copies ENABLE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS workspaces_select ON dataenv.workspaces;
CREATE POLICY workspaces_select ON dataenv.workspaces FOR SELECT USING (dataenv.can_use_workspace(id));
DROP POLICY IF EXISTS workspaces_insert ON dataenv.workspaces;
CREATE POLICY workspaces_insert ON dataenv.workspaces FOR INSERT
    WITH CHECK (NOT is_fork AND parent IS NULL AND created_by = current_user);
DROP POLICY IF EXISTS workspaces_delete ON dataenv.workspaces;
CREATE POLICY workspaces_delete ON dataenv.workspaces FOR DELETE USING (NOT is_fork AND dataenv.can_own_workspace(id));

-- Members of a workspace see its member list; its owner (and admins) manage it.
DROP POLICY IF EXISTS workspace_members_select ON dataenv.workspace_members;
CREATE POLICY workspace_members_select ON dataenv.workspace_members FOR SELECT
    USING (dataenv.can_use_workspace(workspace));
DROP POLICY IF EXISTS workspace_members_insert ON dataenv.workspace_members;
CREATE POLICY workspace_members_insert ON dataenv.workspace_members FOR INSERT
    WITH CHECK (dataenv.can_own_workspace(workspace) AND granted_by = current_user);
DROP POLICY IF EXISTS workspace_members_delete ON dataenv.workspace_members;
CREATE POLICY workspace_members_delete ON dataenv.workspace_members FOR DELETE
    USING (dataenv.can_own_workspace(workspace));

DROP POLICY IF EXISTS datatables_select ON dataenv.datatables;
CREATE POLICY datatables_select ON dataenv.datatables FOR SELECT USING (dataenv.can_use_workspace(workspace));
DROP POLICY IF EXISTS datatables_insert ON dataenv.datatables;
CREATE POLICY datatables_insert ON dataenv.datatables FOR INSERT
    WITH CHECK (dataenv.can_use_workspace(workspace) AND source = 'configured');
DROP POLICY IF EXISTS datatables_delete ON dataenv.datatables;
CREATE POLICY datatables_delete ON dataenv.datatables FOR DELETE USING (dataenv.can_use_workspace(workspace));

DROP POLICY IF EXISTS fork_copies_select ON dataenv.fork_copies;
CREATE POLICY fork_copies_select ON dataenv.fork_copies FOR SELECT USING (dataenv.can_use_workspace(workspace));

DROP TRIGGER IF EXISTS datatables_before_write ON dataenv.datatables;
CREATE TRIGGER datatables_before_write BEFORE INSERT OR UPDATE ON dataenv.datatables
    FOR EACH ROW EXECUTE FUNCTION dataenv.datatables_before_write();

-- Tombstones are internal: what a dropped workspace left is shown to nobody but administrators.
REVOKE ALL ON dataenv.workspace_tombstones FROM PUBLIC;
GRANT SELECT ON dataenv.workspace_tombstones TO dataenv_admin;
