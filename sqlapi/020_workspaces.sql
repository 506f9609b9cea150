-- Workspaces, membership, datatables, fork chains and the fork requests.
--
-- Who may use a workspace: its members (dataenv.workspace_members; a role is a member when it is,
-- or is a member of, a member role) and dataenv_admin. Row-level security enforces it on every
-- table here, the user-facing functions are SECURITY INVOKER so that it applies to the caller,
-- and the sidecar checks it again for the role that made a request. Views that walk a fork chain
-- (the parent may be a workspace the caller is not a member of) are owned by the installing role
-- and filter on the caller's membership of the workspace they start from.
--
-- Lock: a datatable row is saved under the lifecycle lock of its cluster (a trigger takes
-- dataenv.lock_cluster_lifecycle), so a database is never dropped while a new entry starts
-- naming it.

-- ---------------------------------------------------------------------------------------------
-- Names and membership
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.check_workspace_id(fn text, id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF id IS NULL OR id = '' THEN
        RAISE EXCEPTION '%: workspace id is required', fn USING ERRCODE = '22023';
    END IF;
    IF octet_length(id) > 63 THEN
        RAISE EXCEPTION '%: workspace id % is % bytes; the limit is 63', fn, to_json(left(id, 80))::text, octet_length(id)
            USING ERRCODE = '22023';
    END IF;
    IF id !~ '^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*$' THEN
        RAISE EXCEPTION '%: workspace id % is not allowed', fn, to_json(id)::text
            USING ERRCODE = '22023',
                  DETAIL = 'Workspace ids are lowercase ASCII letters, digits, "_", "-" and ".", in segments separated by "/", each starting with a letter or digit.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_workspace_id(text, text) IS
    'Raises unless id is an acceptable workspace id: at most 63 bytes of [a-z0-9_.-] segments separated by "/", each starting with a letter or digit.';

-- The rule for names users choose (datatables here, lakes, storages and lake tables in
-- 040_lakes.sql): one function, so the rule and its message are the same everywhere.
CREATE OR REPLACE FUNCTION dataenv.check_simple_name(fn text, what text, value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value = '' THEN
        RAISE EXCEPTION '%: % name is required', fn, what USING ERRCODE = '22023';
    END IF;
    IF octet_length(value) > 63 OR value !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION '%: % name % is not allowed', fn, what, to_json(left(value, 80))::text
            USING ERRCODE = '22023',
                  DETAIL = 'Names are 1 to 63 lowercase ASCII letters, digits and underscores, starting with a letter.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_simple_name(text, text, text) IS
    'Raises unless value is an acceptable user-chosen name: 1-63 bytes of [a-z0-9_] starting with a letter.';

CREATE OR REPLACE FUNCTION dataenv.check_datatable_name(fn text, name text) RETURNS void
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.check_simple_name(fn, 'datatable', name)
$$;
COMMENT ON FUNCTION dataenv.check_datatable_name(text, text) IS
    'Raises unless name is an acceptable datatable name: 1-63 bytes of [a-z0-9_] starting with a letter.';

-- Whether role is (or is a member of) one of the workspace's member roles. SECURITY DEFINER so
-- that policies on workspace_members itself can use it without recursing; it answers only this
-- yes/no question.
CREATE OR REPLACE FUNCTION dataenv.is_workspace_member(workspace text, role name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM dataenv.workspace_members m
                     JOIN pg_catalog.pg_roles r ON r.rolname = m.member
                     JOIN pg_catalog.pg_roles u ON u.rolname = is_workspace_member.role
                    WHERE m.workspace = is_workspace_member.workspace
                      AND pg_catalog.pg_has_role(u.oid, r.oid, 'MEMBER'))
$$;
COMMENT ON FUNCTION dataenv.is_workspace_member(text, name) IS
    'True when role is one of the workspace''s member roles or a member of one.';

-- The caller may use the workspace: a member, or dataenv_admin. (The SET clause keeps it from
-- being inlined into policies.)
CREATE OR REPLACE FUNCTION dataenv.can_use_workspace(workspace text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_has_role(current_user, 'dataenv_admin', 'MEMBER')
        OR dataenv.is_workspace_member(can_use_workspace.workspace, current_user)
$$;
COMMENT ON FUNCTION dataenv.can_use_workspace(text) IS
    'True when the current role may use the workspace: it is a member (directly or through a member role) or dataenv_admin.';

-- Internal: facts about any workspace, visible or not (existence is not a secret; contents are).
CREATE OR REPLACE FUNCTION dataenv.workspace_facts(id text, OUT found boolean, OUT is_fork boolean, OUT children text[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace_facts.id),
           (SELECT w.is_fork FROM dataenv.workspaces w WHERE w.id = workspace_facts.id),
           coalesce((SELECT array_agg(c.id ORDER BY c.id) FROM dataenv.workspaces c WHERE c.parent = workspace_facts.id), '{}')
$$;
COMMENT ON FUNCTION dataenv.workspace_facts(text) IS
    'Internal: whether a workspace exists, whether it is a fork, and its child forks, whoever may see it.';

CREATE OR REPLACE FUNCTION dataenv.fork_copy_leftovers(workspace text) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*)::integer FROM dataenv.fork_copies c WHERE c.workspace = fork_copy_leftovers.workspace
$$;
COMMENT ON FUNCTION dataenv.fork_copy_leftovers(text) IS
    'Internal: how many fork copies are still registered for a workspace id (leftovers of a dropped fork included).';

-- The advisory lock class of a workspace id (second key: hashtext(id)): the sidecar holds it for
-- the whole of a create_fork or drop_fork, so two requests for one fork id never interleave. A
-- purpose of its own in dataenv.lock_class, so a workspace id never shares a key with a
-- cluster's lifecycle lock.
CREATE OR REPLACE FUNCTION dataenv.workspace_lock_class() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT dataenv.lock_class('workspace') $$;
COMMENT ON FUNCTION dataenv.workspace_lock_class() IS
    'Advisory lock class id (first key) of the per-workspace-id lock the sidecar holds during create_fork and drop_fork.';

-- ---------------------------------------------------------------------------------------------
-- Triggers
-- ---------------------------------------------------------------------------------------------

-- is_fork, id and the creation columns never change; parent only ever becomes NULL (the
-- ON DELETE SET NULL of a dropped parent).
CREATE OR REPLACE FUNCTION dataenv.workspaces_before_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id OR NEW.is_fork IS DISTINCT FROM OLD.is_fork
       OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.created_by_request IS DISTINCT FROM OLD.created_by_request
       OR NEW.shared_lakes IS DISTINCT FROM OLD.shared_lakes OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'dataenv: workspace %: id, is_fork, shared_lakes and the creation columns cannot change', to_json(OLD.id)::text
            USING ERRCODE = '55000';
    END IF;
    IF NEW.parent IS NOT NULL AND NEW.parent IS DISTINCT FROM OLD.parent THEN
        RAISE EXCEPTION 'dataenv: workspace %: the parent of a fork cannot change', to_json(OLD.id)::text
            USING ERRCODE = '55000';
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_before_update() IS
    'Keeps a workspace''s id, is_fork flag and creation columns immutable; a parent can only become NULL (parent dropped).';
DROP TRIGGER IF EXISTS workspaces_before_update ON dataenv.workspaces;
CREATE TRIGGER workspaces_before_update BEFORE UPDATE ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_before_update();

-- The creator becomes a member. created_by is current_user for users (they may only insert id).
CREATE OR REPLACE FUNCTION dataenv.workspaces_after_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO dataenv.workspace_members (workspace, member, granted_by)
    VALUES (NEW.id, NEW.created_by, NEW.created_by)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_after_insert() IS 'Makes the creator of a workspace its first member.';
DROP TRIGGER IF EXISTS workspaces_after_insert ON dataenv.workspaces;
CREATE TRIGGER workspaces_after_insert AFTER INSERT ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_after_insert();

-- A datatable is saved under the lifecycle lock of its cluster, and may name a fork copy only of
-- its own workspace or of one of its ancestors (what keep_original inherits).
CREATE OR REPLACE FUNCTION dataenv.datatables_before_write() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner_ws text;
BEGIN
    PERFORM dataenv.lock_cluster_lifecycle(NEW.cluster);
    SELECT c.workspace INTO owner_ws FROM dataenv.fork_copies c
     WHERE c.cluster = NEW.cluster AND c.database = NEW.database;
    IF FOUND AND NOT EXISTS (SELECT FROM dataenv.workspace_chain_all ch
                              WHERE ch.workspace = NEW.workspace AND ch.ancestor = owner_ws) THEN
        RAISE EXCEPTION 'dataenv: database % on cluster % is a fork copy made for workspace %; workspace % cannot use it',
            to_json(NEW.database)::text, to_json(NEW.cluster)::text, to_json(owner_ws)::text, to_json(NEW.workspace)::text
            USING ERRCODE = '42501',
                  DETAIL = 'A fork copy belongs to the workspace it was made for (and that workspace''s forks); its name is not an authorization.';
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.datatables_before_write() IS
    'Takes the cluster''s lifecycle lock for a datatable save and refuses a fork copy of another workspace.';

-- ---------------------------------------------------------------------------------------------
-- Chains and resolution (views owned by the installing role; *_all are internal)
-- ---------------------------------------------------------------------------------------------

-- Every workspace with each of its ancestors: depth 0 is the workspace itself, then its parent,
-- up to a root or to the last existing ancestor of an orphaned chain.
CREATE OR REPLACE VIEW dataenv.workspace_chain_all AS
WITH RECURSIVE chain AS (
    SELECT w.id AS workspace, 0 AS depth, w.id AS ancestor, w.is_fork, w.parent, w.shared_lakes
      FROM dataenv.workspaces w
    UNION ALL
    SELECT c.workspace, c.depth + 1, p.id, p.is_fork, p.parent, p.shared_lakes
      FROM chain c
      JOIN dataenv.workspaces p ON p.id = c.parent
     WHERE c.depth < 100
)
SELECT workspace, depth, ancestor, is_fork AS ancestor_is_fork, parent AS ancestor_parent,
       shared_lakes AS ancestor_shared_lakes, (is_fork AND parent IS NULL) AS ancestor_orphaned
  FROM chain;
COMMENT ON VIEW dataenv.workspace_chain_all IS
    'Internal: every workspace with its ancestors (depth 0 = itself). ancestor_orphaned: a fork whose parent is gone ends the chain.';

CREATE OR REPLACE VIEW dataenv.workspace_chain WITH (security_barrier) AS
SELECT * FROM dataenv.workspace_chain_all WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.workspace_chain IS
    'The fork chains of the workspaces the caller may use: depth 0 is the workspace, then its parent, up to the root (or the last ancestor of an orphaned fork).';

-- Datatable resolution: a configured, schema_only or full_copy row resolves to its own database;
-- a keep_original row follows the parent's row of the same name, recursively, and falls back to
-- its recorded database where the chain stops (parent gone, or parent without the datatable).
CREATE OR REPLACE VIEW dataenv.datatable_resolution_all AS
WITH RECURSIVE walk AS (
    SELECT d.workspace, d.name, d.source AS mode, d.workspace AS at, 0 AS depth, d.source, d.cluster, d.database
      FROM dataenv.datatables d
    UNION ALL
    SELECT w.workspace, w.name, w.mode, p.workspace, w.depth + 1, p.source, p.cluster, p.database
      FROM walk w
      JOIN dataenv.workspaces ws ON ws.id = w.at
      JOIN dataenv.datatables p ON p.workspace = ws.parent AND p.name = w.name
     WHERE w.source = 'keep_original' AND w.depth < 100
)
SELECT DISTINCT ON (workspace, name)
       workspace, name AS datatable, mode, cluster, database, at AS resolved_from, depth,
       (source = 'keep_original') AS fallback
  FROM walk
 ORDER BY workspace, name, depth DESC;
COMMENT ON VIEW dataenv.datatable_resolution_all IS
    'Internal: every datatable of every workspace resolved to (cluster, database) through the fork chain.';

CREATE OR REPLACE VIEW dataenv.datatable_resolution WITH (security_barrier) AS
SELECT * FROM dataenv.datatable_resolution_all WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.datatable_resolution IS
    'The datatables of the workspaces the caller may use, resolved to (cluster, database): mode is the workspace''s own (configured, keep_original, schema_only, full_copy), resolved_from the workspace whose entry supplied the database, fallback true when a keep_original chain stopped (orphaned fork) and the database recorded at fork time is used.';

CREATE OR REPLACE FUNCTION dataenv.resolve_datatable(workspace text, datatable text)
RETURNS TABLE (cluster text, database text, resolved_from text, mode text, fallback boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.resolve_datatable';
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    PERFORM dataenv.check_datatable_name(fn, datatable);
    IF NOT dataenv.can_use_workspace(workspace) OR NOT (dataenv.workspace_facts(workspace)).found THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(workspace)::text, current_user
            USING ERRCODE = '42501';
    END IF;
    RETURN QUERY SELECT r.cluster, r.database, r.resolved_from, r.mode, r.fallback
                   FROM dataenv.datatable_resolution r
                  WHERE r.workspace = resolve_datatable.workspace AND r.datatable = resolve_datatable.datatable;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: workspace % has no datatable %', fn, to_json(workspace)::text, to_json(datatable)::text
            USING ERRCODE = 'P0002', HINT = 'SELECT * FROM dataenv.datatable_resolution lists them.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.resolve_datatable(text, text) IS
    'Resolves a datatable of a workspace the caller may use to its (cluster, database), walking the fork chain for keep_original datatables.';

CREATE OR REPLACE FUNCTION dataenv.fork_chain(workspace text)
RETURNS TABLE (depth integer, ancestor text, is_fork boolean, orphaned boolean, shared_lakes text[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_workspace_id('dataenv.fork_chain', workspace);
    IF NOT dataenv.can_use_workspace(workspace) OR NOT (dataenv.workspace_facts(workspace)).found THEN
        RAISE EXCEPTION 'dataenv.fork_chain: no workspace % that % may use', to_json(workspace)::text, current_user
            USING ERRCODE = '42501';
    END IF;
    RETURN QUERY SELECT c.depth, c.ancestor, c.ancestor_is_fork, c.ancestor_orphaned, c.ancestor_shared_lakes
                   FROM dataenv.workspace_chain c WHERE c.workspace = fork_chain.workspace ORDER BY c.depth;
END
$$;
COMMENT ON FUNCTION dataenv.fork_chain(text) IS
    'The workspace (depth 0) and its ancestors, nearest first, up to the root or the last ancestor of an orphaned fork.';

-- Fork copies of the workspaces the caller may use.
CREATE OR REPLACE VIEW dataenv.fork_copy_list WITH (security_barrier) AS
SELECT c.workspace, c.datatable, c.cluster, c.database, c.mode, c.method, c.state, c.parent_database,
       c.created_by_request, c.created_at, c.ready_at
  FROM dataenv.fork_copies c
 WHERE dataenv.can_use_workspace(c.workspace);
COMMENT ON VIEW dataenv.fork_copy_list IS
    'The fork copies (databases create_fork made) of the workspaces the caller may use, with the workspace each was made for.';

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
CREATE POLICY workspaces_delete ON dataenv.workspaces FOR DELETE USING (NOT is_fork AND dataenv.can_use_workspace(id));

-- Members of a workspace see (and manage) its member list; admins see all.
DROP POLICY IF EXISTS workspace_members_select ON dataenv.workspace_members;
CREATE POLICY workspace_members_select ON dataenv.workspace_members FOR SELECT
    USING (dataenv.can_use_workspace(workspace));
DROP POLICY IF EXISTS workspace_members_insert ON dataenv.workspace_members;
CREATE POLICY workspace_members_insert ON dataenv.workspace_members FOR INSERT
    WITH CHECK (dataenv.can_use_workspace(workspace) AND granted_by = current_user);
DROP POLICY IF EXISTS workspace_members_delete ON dataenv.workspace_members;
CREATE POLICY workspace_members_delete ON dataenv.workspace_members FOR DELETE
    USING (dataenv.can_use_workspace(workspace));

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

-- ---------------------------------------------------------------------------------------------
-- Uses: what names a managed database (see dataenv.managed_database_uses in 010)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.managed_database_uses__workspaces(cluster text, database text)
RETURNS TABLE (kind text, name text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'datatable', d.workspace || '/' || d.name, 'source ' || d.source
      FROM dataenv.datatables d
     WHERE d.cluster = managed_database_uses__workspaces.cluster AND d.database = managed_database_uses__workspaces.database
    UNION ALL
    SELECT 'fork copy', c.workspace, format('datatable %s, %s, %s', c.datatable, c.mode, c.state)
      FROM dataenv.fork_copies c
     WHERE c.cluster = managed_database_uses__workspaces.cluster AND c.database = managed_database_uses__workspaces.database
    UNION ALL
    SELECT 'fork parent', c.workspace, format('%s copy %s of datatable %s is being made from it', c.mode, c.database, c.datatable)
      FROM dataenv.fork_copies c
     WHERE c.cluster = managed_database_uses__workspaces.cluster AND c.parent_database = managed_database_uses__workspaces.database
       AND c.state = 'creating'
$$;
COMMENT ON FUNCTION dataenv.managed_database_uses__workspaces(text, text) IS
    'Uses of a database by workspaces: datatable entries (workspace/name), fork copies (by the workspace they were made for), and copies being made from it.';

-- ---------------------------------------------------------------------------------------------
-- Requests: create_fork, drop_fork
-- ---------------------------------------------------------------------------------------------

-- Validators are SECURITY INVOKER: they run as the role inserting the request and see only the
-- workspaces it may use. The sidecar checks again for the role that made the request.
CREATE OR REPLACE FUNCTION dataenv.validate_create_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v jsonb;
    parent text := args->>'parent';
    fork text := args->>'fork';
BEGIN
    PERFORM dataenv.check_request_keys('create_fork', args, ARRAY['parent', 'fork'], ARRAY['datatables', 'shared_lakes']);
    PERFORM dataenv.check_workspace_id('create_fork', parent);
    PERFORM dataenv.check_workspace_id('create_fork', fork);
    IF NOT dataenv.can_use_workspace(parent) OR NOT (dataenv.workspace_facts(parent)).found THEN
        RAISE EXCEPTION 'create_fork: no workspace % that % may use', to_json(parent)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF (dataenv.workspace_facts(fork)).found THEN
        RAISE EXCEPTION 'create_fork: workspace % already exists', to_json(fork)::text USING ERRCODE = '23505';
    END IF;
    IF args ? 'datatables' THEN
        IF jsonb_typeof(args->'datatables') <> 'object' THEN
            RAISE EXCEPTION 'create_fork: datatables must be a JSON object {"<datatable>": "keep_original" | "schema_only" | "full_copy"}'
                USING ERRCODE = '22023';
        END IF;
        FOR k, v IN SELECT * FROM jsonb_each(args->'datatables') LOOP
            IF jsonb_typeof(v) <> 'string' OR v #>> '{}' NOT IN ('keep_original', 'schema_only', 'full_copy') THEN
                RAISE EXCEPTION 'create_fork: datatable %: mode must be keep_original, schema_only or full_copy (got %)', to_json(k)::text, v::text
                    USING ERRCODE = '22023';
            END IF;
            IF NOT EXISTS (SELECT FROM dataenv.datatable_resolution r WHERE r.workspace = parent AND r.datatable = k) THEN
                RAISE EXCEPTION 'create_fork: workspace % has no datatable %', to_json(parent)::text, to_json(k)::text USING ERRCODE = '22023';
            END IF;
        END LOOP;
    END IF;
    IF args ? 'shared_lakes' THEN
        IF jsonb_typeof(args->'shared_lakes') <> 'array'
           OR EXISTS (SELECT FROM jsonb_array_elements(args->'shared_lakes') e
                       WHERE jsonb_typeof(e) <> 'string' OR e #>> '{}' !~ '^[a-z][a-z0-9_]*$' OR octet_length(e #>> '{}') > 63) THEN
            RAISE EXCEPTION 'create_fork: shared_lakes must be an array of lake names' USING ERRCODE = '22023';
        END IF;
        PERFORM dataenv.check_shared_lakes(args->>'parent',
            ARRAY(SELECT jsonb_array_elements_text(args->'shared_lakes')));
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_create_fork(jsonb) IS 'Validates the args of a create_fork request.';

CREATE OR REPLACE FUNCTION dataenv.validate_drop_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fork text := args->>'fork';
    f record;
BEGIN
    PERFORM dataenv.check_request_keys('drop_fork', args, ARRAY['fork'], ARRAY['cascade']);
    PERFORM dataenv.check_workspace_id('drop_fork', fork);
    IF args ? 'cascade' AND jsonb_typeof(args->'cascade') <> 'boolean' THEN
        RAISE EXCEPTION 'drop_fork: cascade must be a boolean' USING ERRCODE = '22023';
    END IF;
    f := dataenv.workspace_facts(fork);
    IF NOT f.found THEN
        IF dataenv.fork_copy_leftovers(fork) = 0 THEN
            RAISE EXCEPTION 'drop_fork: no workspace %, and no fork copies of one are left', to_json(fork)::text USING ERRCODE = 'P0002';
        END IF;
        RETURN; -- finishing the cleanup of a dropped fork
    END IF;
    IF NOT dataenv.can_use_workspace(fork) THEN
        RAISE EXCEPTION 'drop_fork: no workspace % that % may use', to_json(fork)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF NOT f.is_fork THEN
        RAISE EXCEPTION 'drop_fork: workspace % is not a fork', to_json(fork)::text
            USING ERRCODE = '55000', HINT = 'dataenv.drop_workspace drops a root workspace.';
    END IF;
    IF cardinality(f.children) > 0 AND NOT coalesce((args->>'cascade')::boolean, false) THEN
        RAISE EXCEPTION 'drop_fork: workspace % has child forks (%)', to_json(fork)::text, array_to_string(f.children, ', ')
            USING ERRCODE = '2BP01', HINT = 'Drop them first, or ask for it explicitly: dataenv.drop_fork(fork, cascade => true).';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_drop_fork(jsonb) IS 'Validates the args of a drop_fork request.';

INSERT INTO dataenv.request_kinds (kind, validator, description) VALUES
    ('create_fork', 'dataenv.validate_create_fork(jsonb)'::regprocedure,
     'Creates a fork of a workspace: keep_original datatables share the parent''s database, schema_only and full_copy ones get a database of their own.'),
    ('drop_fork', 'dataenv.validate_drop_fork(jsonb)'::regprocedure,
     'Drops a fork and the databases it owns (each guarded; registry rows removed only after their drop); retryable.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, description = EXCLUDED.description;

CREATE OR REPLACE FUNCTION dataenv.create_fork(parent text, fork text, datatables jsonb DEFAULT '{}',
                                              shared_lakes text[] DEFAULT '{}') RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_fork', jsonb_build_object('parent', parent, 'fork', fork,
                                              'datatables', coalesce(datatables, '{}'::jsonb),
                                              'shared_lakes', to_jsonb(coalesce(shared_lakes, '{}'::text[]))))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_fork(text, text, jsonb, text[]) IS
    'Requests a fork of workspace parent named fork. datatables maps a datatable name to keep_original (default: the fork uses the parent''s database), schema_only (a new database with the parent''s schema, no rows) or full_copy (schema and rows). Lakes are isolated unless listed in shared_lakes. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.drop_fork(fork text, cascade boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_fork', jsonb_build_object('fork', fork, 'cascade', coalesce(cascade, false)))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_fork(text, boolean) IS
    'Requests the drop of a fork: the workspace, then each database it owns (marker and record required); each registry row is removed only after its drop. Refused while child forks exist unless cascade. Partial failures are reported; run it again to retry. Returns the request id.';

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
    dataenv.workspace_facts(text), dataenv.fork_copy_leftovers(text), dataenv.is_workspace_member(text, name),
    dataenv.managed_database_uses__workspaces(text, text),
    dataenv.create_workspace(text), dataenv.drop_workspace(text),
    dataenv.grant_workspace(text, name), dataenv.revoke_workspace(text, name),
    dataenv.add_datatable(text, text, text, text), dataenv.remove_datatable(text, text),
    dataenv.resolve_datatable(text, text), dataenv.fork_chain(text),
    dataenv.create_fork(text, text, jsonb, text[]), dataenv.drop_fork(text, boolean)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    dataenv.workspace_facts(text), dataenv.fork_copy_leftovers(text),
    dataenv.create_workspace(text), dataenv.drop_workspace(text),
    dataenv.grant_workspace(text, name), dataenv.revoke_workspace(text, name),
    dataenv.add_datatable(text, text, text, text), dataenv.remove_datatable(text, text),
    dataenv.resolve_datatable(text, text), dataenv.fork_chain(text),
    dataenv.create_fork(text, text, jsonb, text[]), dataenv.drop_fork(text, boolean),
    dataenv.can_use_workspace(text), dataenv.is_workspace_member(text, name),
    dataenv.check_workspace_id(text, text), dataenv.check_datatable_name(text, text)
  TO dataenv_user, dataenv_admin;
