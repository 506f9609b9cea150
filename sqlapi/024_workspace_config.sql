-- ---------------------------------------------------------------------------------------------
-- Configuration functions (SECURITY INVOKER: row-level security applies to the caller)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.create_workspace(id text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_root_workspace_id('dataenv.create_workspace', id);
    IF (dataenv.workspace_facts(id)).found THEN
        RAISE EXCEPTION 'dataenv.create_workspace: workspace % already exists', to_json(id)::text USING ERRCODE = '23505';
    END IF;
    -- The insert trigger refuses the id while anything of a dropped workspace of that id is left.
    INSERT INTO dataenv.workspaces (id) VALUES (id);
END
$$;
COMMENT ON FUNCTION dataenv.create_workspace(text) IS
    'Creates a (root) workspace; the caller becomes its owner and first member. Root ids have no "/" (the fork-path shape); the id of a dropped workspace is refused until its cleanup is finished.';

-- Internal: raises unless the caller may administer an existing workspace (its owner or an
-- administrator). A workspace the caller may not use is reported as missing.
CREATE OR REPLACE FUNCTION dataenv.require_workspace_owner(fn text, workspace text, what text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    IF NOT dataenv.can_use_workspace(workspace) OR NOT (dataenv.workspace_facts(workspace)).found THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(workspace)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF NOT dataenv.can_own_workspace(workspace) THEN
        RAISE EXCEPTION '%: % is not the owner of workspace %', fn, current_user, to_json(workspace)::text
            USING ERRCODE = '42501',
                  HINT = format('Only its owner (%s) or a dataenv administrator may %s.',
                                (SELECT w.created_by FROM dataenv.workspaces w WHERE w.id = workspace), what);
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_workspace_owner(text, text, text) IS
    'Internal: raises unless workspace exists and the caller is its owner or a dataenv administrator (what names the act in the hint).';

CREATE OR REPLACE FUNCTION dataenv.drop_workspace(id text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.drop_workspace';
    deps text;
    ex_fork text;
    ex_table text;
BEGIN
    PERFORM dataenv.require_workspace_owner(fn, id, 'drop it');
    IF (dataenv.workspace_facts(id)).is_fork THEN
        RAISE EXCEPTION '%: workspace % is a fork', fn, to_json(id)::text
            USING ERRCODE = '55000', HINT = format('Forks own databases: SELECT dataenv.drop_fork(%L) drops them.', id);
    END IF;
    PERFORM dataenv.refuse_protected(fn, id, 'be dropped');
    SELECT string_agg(format('%s (%s)', d.fork, d.tables), ', ' ORDER BY d.fork), min(d.fork),
           (array_agg(split_part(d.tables, ', ', 1) ORDER BY d.fork))[1]
      INTO deps, ex_fork, ex_table
      FROM dataenv.lake_dependents(id) d;
    IF deps IS NOT NULL THEN
        RAISE EXCEPTION '%: forks read lake tables of workspace % (deferred): %', fn, to_json(id)::text, deps
            USING ERRCODE = '55000',
                  DETAIL = 'A fork reads the lake tables it has not materialized from its parent; they would be gone with the parent.',
                  HINT = format('Drop those forks first (dataenv.drop_fork), or give each its own copy of a table, e.g. '
                                'SELECT dataenv.materialize(%L, %L, %L);', ex_fork,
                                'ducklake://' || split_part(ex_table, '.', 1) || '/' || split_part(ex_table, '.', 2),
                                format('ATTACH %L AS dl; SELECT * FROM dl.%I', 'ducklake://' || split_part(ex_table, '.', 1),
                                       split_part(ex_table, '.', 2)));
    END IF;
    -- Its forks stay forks (orphaned): their keep_original datatables fall back to the databases
    -- recorded at fork time, their lakes keep their own tables. Triggers take its lake rows and
    -- materialization records with it and leave a tombstone, removed at once when nothing is left.
    DELETE FROM dataenv.workspaces w WHERE w.id = drop_workspace.id;
    PERFORM dataenv.bury_workspace(id);
END
$$;
COMMENT ON FUNCTION dataenv.drop_workspace(text) IS
    'Drops a root workspace (not a fork) the caller owns (or any, for an administrator): its datatable entries, members, lake configuration and materialization records; the databases, catalogs and files are left alone. Refused while it is protected (dataenv.unprotect_workspace) and while forks read its lake tables (deferred). Its forks become orphaned forks and keep working.';

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
    PERFORM dataenv.require_workspace_owner(fn, workspace, 'grant its membership');
    INSERT INTO dataenv.workspace_members (workspace, member) VALUES (workspace, member) ON CONFLICT DO NOTHING;
END
$$;
COMMENT ON FUNCTION dataenv.grant_workspace(text, name) IS
    'Makes a role (and every role that is a member of it) a member of a workspace the caller owns (or any, for an administrator).';

CREATE OR REPLACE FUNCTION dataenv.revoke_workspace(workspace text, member name) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.revoke_workspace';
BEGIN
    PERFORM dataenv.require_workspace_owner(fn, workspace, 'revoke its membership');
    DELETE FROM dataenv.workspace_members m WHERE m.workspace = revoke_workspace.workspace AND m.member = revoke_workspace.member;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: % is not a member of workspace %', fn, to_json(member::text)::text, to_json(workspace)::text
            USING ERRCODE = 'P0002';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.revoke_workspace(text, name) IS
    'Removes a member role from a workspace the caller owns (or any, for an administrator). The owner stays able to use it.';

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
    PERFORM dataenv.check_binding(fn, cluster, database, current_user);
    -- The trigger takes the cluster's lifecycle lock and checks the binding again (a plain INSERT
    -- gets the same checks).
    INSERT INTO dataenv.datatables (workspace, name, cluster, database) VALUES (workspace, name, cluster, database);
END
$$;
COMMENT ON FUNCTION dataenv.add_datatable(text, text, text, text) IS
    'Binds datatable name of a workspace the caller may use to a database of a registered cluster, under the cluster''s lifecycle lock. Needs dataenv_admin or a grant of the database (dataenv.grant_database); the control database, dataenv installations, templates and fork copies are never bound. Jobs reach it as datatable://name.';

CREATE OR REPLACE FUNCTION dataenv.remove_datatable(workspace text, name text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.remove_datatable';
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    PERFORM dataenv.check_datatable_name(fn, name);
    PERFORM dataenv.refuse_protected(fn, workspace, format('have its datatable %s removed', to_json(name)::text));
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
    'Removes a datatable entry of a workspace the caller may use (the database is left alone). A fork''s own copies are removed by drop_fork only; refused while the workspace is protected.';
