-- ---------------------------------------------------------------------------------------------
-- Configuration functions (SECURITY INVOKER: row-level security applies to the caller)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.create_workspace(id text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_workspace_id('dataenv.create_workspace', id);
    IF (dataenv.workspace_facts(id)).found THEN
        RAISE EXCEPTION 'dataenv.create_workspace: workspace % already exists', to_json(id)::text USING ERRCODE = '23505';
    END IF;
    IF dataenv.fork_copy_leftovers(id) > 0 THEN
        RAISE EXCEPTION 'dataenv.create_workspace: fork copies of a dropped workspace % are still registered', to_json(id)::text
            USING ERRCODE = '55000', HINT = format('Finish their cleanup first: SELECT dataenv.drop_fork(%L).', id);
    END IF;
    INSERT INTO dataenv.workspaces (id) VALUES (id);
END
$$;
COMMENT ON FUNCTION dataenv.create_workspace(text) IS
    'Creates a (root) workspace; the caller becomes its first member.';

CREATE OR REPLACE FUNCTION dataenv.drop_workspace(id text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.drop_workspace';
    f record;
BEGIN
    PERFORM dataenv.check_workspace_id(fn, id);
    f := dataenv.workspace_facts(id);
    IF NOT f.found OR NOT dataenv.can_use_workspace(id) THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(id)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF f.is_fork THEN
        RAISE EXCEPTION '%: workspace % is a fork', fn, to_json(id)::text
            USING ERRCODE = '55000', HINT = format('Forks own databases: SELECT dataenv.drop_fork(%L) drops them.', id);
    END IF;
    -- Its forks stay forks (orphaned): their keep_original datatables fall back to the databases
    -- recorded at fork time.
    DELETE FROM dataenv.workspaces w WHERE w.id = drop_workspace.id;
END
$$;
COMMENT ON FUNCTION dataenv.drop_workspace(text) IS
    'Drops a root workspace (not a fork) and its datatable entries; the databases are left alone. Its forks become orphaned forks and keep working.';

CREATE OR REPLACE FUNCTION dataenv.grant_workspace(workspace text, member name) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.grant_workspace';
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    IF member IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = member) THEN
        RAISE EXCEPTION '%: no role %', fn, coalesce(to_json(member::text)::text, 'NULL') USING ERRCODE = '42704';
    END IF;
    IF NOT dataenv.can_use_workspace(workspace) OR NOT (dataenv.workspace_facts(workspace)).found THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(workspace)::text, current_user USING ERRCODE = '42501';
    END IF;
    INSERT INTO dataenv.workspace_members (workspace, member) VALUES (workspace, member) ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION dataenv.grant_workspace(text, name) IS
    'Makes a role (and every role that is a member of it) a member of a workspace the caller may use.';

CREATE OR REPLACE FUNCTION dataenv.revoke_workspace(workspace text, member name) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.revoke_workspace';
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    IF NOT dataenv.can_use_workspace(workspace) THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(workspace)::text, current_user USING ERRCODE = '42501';
    END IF;
    DELETE FROM dataenv.workspace_members m WHERE m.workspace = revoke_workspace.workspace AND m.member = revoke_workspace.member;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: % is not a member of workspace %', fn, to_json(member::text)::text, to_json(workspace)::text
            USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.revoke_workspace(text, name) IS 'Removes a member role from a workspace the caller may use.';

CREATE OR REPLACE FUNCTION dataenv.add_datatable(workspace text, name text, cluster text, database text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.add_datatable';
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    PERFORM dataenv.check_datatable_name(fn, name);
    PERFORM dataenv.check_name('database', database);
    IF cluster IS NULL OR NOT EXISTS (SELECT FROM dataenv.cluster_info c WHERE c.name = add_datatable.cluster) THEN
        RAISE EXCEPTION '%: no cluster %', fn, coalesce(to_json(cluster)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.cluster_info lists the clusters.';
    END IF;
    IF NOT dataenv.can_use_workspace(workspace) OR NOT (dataenv.workspace_facts(workspace)).found THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(workspace)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF EXISTS (SELECT FROM dataenv.datatables d WHERE d.workspace = add_datatable.workspace AND d.name = add_datatable.name) THEN
        RAISE EXCEPTION '%: workspace % already has a datatable %', fn, to_json(workspace)::text, to_json(name)::text
            USING ERRCODE = '23505', HINT = 'dataenv.remove_datatable removes it first.';
    END IF;
    -- The trigger takes the cluster's lifecycle lock and refuses another workspace's fork copy.
    INSERT INTO dataenv.datatables (workspace, name, cluster, database) VALUES (workspace, name, cluster, database);
END
$$;
COMMENT ON FUNCTION dataenv.add_datatable(text, text, text, text) IS
    'Binds datatable name of a workspace the caller may use to a database of a registered cluster, under the cluster''s lifecycle lock. Jobs reach it as datatable://name.';

CREATE OR REPLACE FUNCTION dataenv.remove_datatable(workspace text, name text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.remove_datatable';
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    PERFORM dataenv.check_datatable_name(fn, name);
    IF EXISTS (SELECT FROM dataenv.fork_copies c JOIN dataenv.datatables d ON d.cluster = c.cluster AND d.database = c.database
                WHERE d.workspace = remove_datatable.workspace AND d.name = remove_datatable.name AND c.workspace = d.workspace) THEN
        RAISE EXCEPTION '%: datatable % of workspace % is a fork copy', fn, to_json(name)::text, to_json(workspace)::text
            USING ERRCODE = '55000', HINT = 'Fork copies go with their fork: dataenv.drop_fork drops them.';
    END IF;
    DELETE FROM dataenv.datatables d WHERE d.workspace = remove_datatable.workspace AND d.name = remove_datatable.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no datatable % in a workspace % that % may use', fn, to_json(name)::text, to_json(workspace)::text, current_user
            USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.remove_datatable(text, text) IS
    'Removes a datatable entry of a workspace the caller may use (the database is left alone). A fork''s own copies are removed by drop_fork only.';
