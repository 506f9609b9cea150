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
