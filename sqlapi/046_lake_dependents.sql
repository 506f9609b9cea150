-- ---------------------------------------------------------------------------------------------
-- What forks read from a workspace's lakes (drop_workspace refuses while anything does)
-- ---------------------------------------------------------------------------------------------

-- An isolated fork reads the lake tables it has not materialized from the nearest ancestor that
-- has (dataenv.fork_materialization, state deferred). Once that ancestor's workspace is gone, its
-- lake namespace is no longer dataenv's to keep (nobody maintains it, its catalog database may be
-- dropped, the roles that read it go with the workspace), so the fork's deferred tables could not
-- be read any more: drop_workspace refuses instead, naming the forks and tables.
CREATE OR REPLACE FUNCTION dataenv.lake_dependents(workspace text)
RETURNS TABLE (fork text, tables text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT m.workspace, string_agg(m.lake || '.' || m.table_name, ', ' ORDER BY m.lake, m.table_name)
      FROM dataenv.fork_materialization_rows() m
     WHERE m.state = 'deferred' AND m.from_workspace = lake_dependents.workspace
     GROUP BY m.workspace
     ORDER BY m.workspace
$$;
COMMENT ON FUNCTION dataenv.lake_dependents(text) IS
    'The forks that read lake tables of workspace through read-defer (deferred in dataenv.fork_materialization), with those tables as lake.table.';

REVOKE ALL ON FUNCTION dataenv.lake_dependents(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.lake_dependents(text) TO dataenv_user, dataenv_admin;
