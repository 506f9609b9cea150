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
-- Leftovers: what a dropped workspace still has (what keeps its id from being created again)
-- ---------------------------------------------------------------------------------------------

-- Areas that keep rows per workspace id plug in like the uses above, with a function
--     dataenv.workspace_leftovers__<area>(workspace text)
--         RETURNS TABLE (kind text, detail text, created_by_request uuid)
-- returning one row per thing still held for the id (created_by_request: the request that made
-- it, when one did: a create_fork's own copies are not leftovers of an earlier incarnation).
-- Called for ids without a workspace row.
CREATE OR REPLACE FUNCTION dataenv.workspace_leftovers(workspace text)
RETURNS TABLE (kind text, detail text, created_by_request uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.proname
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'dataenv'::regnamespace
           AND p.proname LIKE 'workspace\_leftovers\_\_%'
           AND p.pronargs = 1 AND p.proargtypes[0] = 'text'::regtype
         ORDER BY p.proname
    LOOP
        RETURN QUERY EXECUTE format('SELECT u.kind::text, u.detail::text, u.created_by_request::uuid FROM dataenv.%I($1) AS u', f.proname) USING workspace;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.workspace_leftovers(text) IS
    'What is still held for a workspace id (fork copies, managed databases, lake rows and namespaces, materializations), gathered from every dataenv.workspace_leftovers__<area>(workspace). A dropped workspace''s id is free once this is empty.';

CREATE OR REPLACE FUNCTION dataenv.workspace_leftovers__workspaces(workspace text)
RETURNS TABLE (kind text, detail text, created_by_request uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'fork copy', format('%s on cluster %s (%s)', c.database, c.cluster, c.state), c.created_by_request
      FROM dataenv.fork_copies c WHERE c.workspace = workspace_leftovers__workspaces.workspace
    UNION ALL
    SELECT 'managed database', format('%s on cluster %s', d.name, d.cluster), d.created_by_request
      FROM dataenv.managed_databases d
     WHERE d.for_workspace = workspace_leftovers__workspaces.workspace
       AND NOT EXISTS (SELECT FROM dataenv.fork_copies c WHERE c.cluster = d.cluster AND c.database = d.name)
$$;
COMMENT ON FUNCTION dataenv.workspace_leftovers__workspaces(text) IS
    'Leftovers of a workspace id in the workspaces area: registered fork copies, and managed databases recorded for it.';

-- Whether anything of a dropped workspace is left (false while the workspace exists), answered
-- only to its owner (the tombstone's) and administrators; false for everyone else.
CREATE OR REPLACE FUNCTION dataenv.workspace_has_leftovers(workspace text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.workspace_access(workspace, session_user) IS NOT NULL
       AND NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace_has_leftovers.workspace)
       AND EXISTS (SELECT FROM dataenv.workspace_leftovers(workspace))
$$;
COMMENT ON FUNCTION dataenv.workspace_has_leftovers(text) IS
    'True when no workspace has the id, something of a dropped one is still held (dataenv.workspace_leftovers), and the session''s user may know: the owner its tombstone records, or an administrator.';

-- Removes the tombstone of a dropped workspace once nothing of it is left. Returns whether the id
-- is free (no workspace, no tombstone).
CREATE OR REPLACE FUNCTION dataenv.bury_workspace(workspace text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT FROM dataenv.workspace_leftovers(workspace)) THEN
        RETURN false;
    END IF;
    DELETE FROM dataenv.workspace_tombstones t WHERE t.id = workspace;
    RETURN true;
END
$$;
COMMENT ON FUNCTION dataenv.bury_workspace(text) IS
    'Internal: removes a dropped workspace''s tombstone when nothing of it is left; true when the id is free.';

-- Tombstones for leftovers of workspaces dropped before tombstones existed (owner unknown:
-- administrators finish their cleanup).
INSERT INTO dataenv.workspace_tombstones (id, owner, is_fork)
SELECT DISTINCT c.workspace, NULL::name, true
  FROM dataenv.fork_copies c
 WHERE NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = c.workspace)
ON CONFLICT (id) DO NOTHING;
