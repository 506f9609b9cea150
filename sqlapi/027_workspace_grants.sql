-- ---------------------------------------------------------------------------------------------
-- Grants
-- ---------------------------------------------------------------------------------------------

REVOKE ALL ON dataenv.workspaces, dataenv.workspace_members, dataenv.datatables, dataenv.fork_copies FROM PUBLIC;
GRANT SELECT, DELETE ON dataenv.workspaces, dataenv.workspace_members, dataenv.datatables TO dataenv_user, dataenv_admin;
GRANT INSERT (id) ON dataenv.workspaces TO dataenv_user, dataenv_admin;
GRANT INSERT (workspace, member) ON dataenv.workspace_members TO dataenv_user, dataenv_admin;
GRANT INSERT (workspace, name, cluster, database) ON dataenv.datatables TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.fork_copies TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.workspace_chain, dataenv.datatable_resolution, dataenv.fork_copy_list TO dataenv_user, dataenv_admin;
REVOKE ALL ON dataenv.workspace_chain_all, dataenv.datatable_resolution_all FROM PUBLIC;

REVOKE EXECUTE ON FUNCTION
    dataenv.workspace_facts(text), dataenv.workspace_exists(text), dataenv.fork_copy_leftovers(text), dataenv.is_workspace_member(text, name),
    dataenv.workspace_access(text, name), dataenv.can_own_workspace(text), dataenv.require_workspace_owner(text, text, text),
    dataenv.check_root_workspace_id(text, text), dataenv.check_fork_id(text, text, text),
    dataenv.workspace_leftovers(text), dataenv.workspace_leftovers__workspaces(text),
    dataenv.workspace_has_leftovers(text), dataenv.bury_workspace(text),
    dataenv.managed_database_uses__workspaces(text, text),
    dataenv.create_workspace(text), dataenv.drop_workspace(text),
    dataenv.grant_workspace(text, name), dataenv.revoke_workspace(text, name),
    dataenv.add_datatable(text, text, text, text), dataenv.remove_datatable(text, text),
    dataenv.resolve_datatable(text, text), dataenv.fork_chain(text),
    dataenv.create_fork(text, text, jsonb, text[], interval, boolean), dataenv.drop_fork(text, boolean)
  FROM PUBLIC;
-- workspace_access, workspace_facts and workspace_has_leftovers answer only for the session's own
-- roles (or to an administrator), so users may call them; workspace_exists tells only what
-- create_workspace tells anyone (and the job validators users run call it); workspace_leftovers
-- and fork_copy_leftovers tell about any id and stay internal.
GRANT EXECUTE ON FUNCTION
    dataenv.workspace_facts(text), dataenv.workspace_exists(text), dataenv.workspace_access(text, name), dataenv.can_own_workspace(text),
    dataenv.require_workspace_owner(text, text, text), dataenv.check_root_workspace_id(text, text),
    dataenv.check_fork_id(text, text, text), dataenv.workspace_has_leftovers(text), dataenv.bury_workspace(text),
    dataenv.create_workspace(text), dataenv.drop_workspace(text),
    dataenv.grant_workspace(text, name), dataenv.revoke_workspace(text, name),
    dataenv.add_datatable(text, text, text, text), dataenv.remove_datatable(text, text),
    dataenv.resolve_datatable(text, text), dataenv.fork_chain(text),
    dataenv.create_fork(text, text, jsonb, text[], interval, boolean), dataenv.drop_fork(text, boolean),
    dataenv.can_use_workspace(text), dataenv.is_workspace_member(text, name),
    dataenv.check_workspace_id(text, text), dataenv.check_datatable_name(text, text),
    dataenv.require_fork(text, text, text)
  TO dataenv_user, dataenv_admin;
