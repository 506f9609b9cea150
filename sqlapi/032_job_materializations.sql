-- ---------------------------------------------------------------------------------------------
-- Materializations
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.materialization_all AS
SELECT DISTINCT ON (workspace, lake, table_name)
       workspace, lake, table_name, status, strategy, snapshot_id, row_count, columns, metadata_schema,
       request_id, error, created_at, source, promoted_from
  FROM dataenv.materializations
 ORDER BY workspace, lake, table_name, id DESC;
COMMENT ON VIEW dataenv.materialization_all IS 'Internal: the latest materialization of each lake table per workspace (promoted_from: the fork whose version dataenv.promote copied in).';

CREATE OR REPLACE VIEW dataenv.materialization_list WITH (security_barrier) AS
SELECT * FROM dataenv.materialization_all WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.materialization_list IS 'The latest materialization of each lake table, in the workspaces the caller may use.';

-- The ancestors of a workspace, nearest first (depth 1 = parent).
CREATE OR REPLACE FUNCTION dataenv.workspace_ancestors(workspace text)
RETURNS TABLE (depth integer, ancestor text, is_fork boolean)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE chain(depth, id, parent, is_fork) AS (
        SELECT 0, w.id, w.parent, w.is_fork FROM dataenv.workspaces w WHERE w.id = $1
        UNION ALL
        SELECT c.depth + 1, w.id, w.parent, w.is_fork
          FROM chain c JOIN dataenv.workspaces w ON w.id = c.parent
         WHERE c.depth < 100
    )
    SELECT c.depth, c.id, c.is_fork FROM chain c WHERE c.depth > 0 ORDER BY c.depth
$$;
COMMENT ON FUNCTION dataenv.workspace_ancestors(text) IS 'The fork chain above a workspace, nearest ancestor first.';

CREATE OR REPLACE FUNCTION dataenv.fork_materialization_rows()
RETURNS TABLE (workspace text, lake text, table_name text, state text, from_workspace text, snapshot_id bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
        WITH forks AS (
            SELECT l.workspace, l.name AS lake
              FROM dataenv.lakes l JOIN dataenv.workspaces w ON w.id = l.workspace
             WHERE w.is_fork AND l.fork_behavior = 'isolated'
        ), chain AS (
            SELECT f.workspace, f.lake, 0 AS depth, f.workspace AS member FROM forks f
            UNION ALL
            SELECT f.workspace, f.lake, a.depth, a.ancestor
              FROM forks f CROSS JOIN LATERAL dataenv.workspace_ancestors(f.workspace) a
        ), latest AS (
            SELECT * FROM dataenv.materialization_all
        ), candidates AS (
            SELECT c.workspace, c.lake, m.table_name, c.depth, c.member, m.status, m.snapshot_id
              FROM chain c JOIN latest m ON m.workspace = c.member AND m.lake = c.lake
        ), decided AS (
            SELECT DISTINCT ON (x.workspace, x.lake, x.table_name) x.workspace, x.lake, x.table_name, x.depth, x.member, x.snapshot_id
              FROM candidates x
             WHERE (x.depth = 0 AND (x.status = 'materialized' OR x.snapshot_id IS NOT NULL))
                OR (x.depth > 0 AND x.status = 'materialized')
             ORDER BY x.workspace, x.lake, x.table_name, x.depth
        ), tables AS (
            SELECT DISTINCT workspace, lake, table_name FROM candidates
        )
        SELECT t.workspace, t.lake, t.table_name,
               CASE WHEN d.depth IS NULL THEN 'absent' WHEN d.depth = 0 THEN 'fork-materialized' ELSE 'deferred' END,
               CASE WHEN d.depth > 0 THEN d.member END,
               d.snapshot_id
          FROM tables t
          LEFT JOIN decided d USING (workspace, lake, table_name)
         ORDER BY 1, 2, 3
$$;
COMMENT ON FUNCTION dataenv.fork_materialization_rows() IS 'Internal: the rows of dataenv.fork_materialization.';

-- The snapshot of from_workspace's namespace that workspace's deferred reads of lake see: the pin
-- of the nearest fork of workspace's chain (itself first) that has one (migrations/064_fork_pins),
-- NULL when they read it live.
CREATE OR REPLACE FUNCTION dataenv.fork_lake_pin(workspace text, lake text, from_workspace text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.snapshot_id
      FROM (SELECT 0 AS depth, $1 AS id UNION ALL SELECT a.depth, a.ancestor FROM dataenv.workspace_ancestors($1) a) c
      JOIN dataenv.fork_lake_pins p ON p.fork = c.id AND p.lake = $2 AND p.ancestor = $3
     ORDER BY c.depth
     LIMIT 1
$$;
COMMENT ON FUNCTION dataenv.fork_lake_pin(text, text, text) IS
    'Internal: the DuckLake snapshot of from_workspace''s namespace that workspace''s deferred reads of lake are pinned to (its own pin, else the nearest ancestor fork''s), NULL when live.';

-- The rows of the view for the calling role (the view's functions run with the caller's EXECUTE
-- rights, so the internal ones are reached through this definer, which filters by the caller).
CREATE OR REPLACE FUNCTION dataenv.fork_materialization_visible()
RETURNS TABLE (workspace text, lake text, table_name text, state text, from_workspace text, snapshot_id bigint, pinned_snapshot bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.workspace, r.lake, r.table_name, r.state, r.from_workspace, r.snapshot_id,
           CASE WHEN r.state = 'deferred' THEN dataenv.fork_lake_pin(r.workspace, r.lake, r.from_workspace) END
      FROM dataenv.fork_materialization_rows() r
     WHERE dataenv.workspace_access(r.workspace, dataenv.acting_role()) IS NOT NULL
$$;
COMMENT ON FUNCTION dataenv.fork_materialization_visible() IS
    'The rows of dataenv.fork_materialization for the workspaces the calling role (dataenv.acting_role) may use, with the pinned snapshot of deferred tables.';

CREATE OR REPLACE VIEW dataenv.fork_materialization WITH (security_barrier) AS
SELECT * FROM dataenv.fork_materialization_visible() r WHERE dataenv.can_use_workspace(r.workspace);
COMMENT ON VIEW dataenv.fork_materialization IS
    'Per fork the caller may use, isolated lake and table: deferred (read from from_workspace, the nearest ancestor that materialized it), fork-materialized (the fork wrote its own), or absent (known in the chain, but no ancestor''s latest run succeeded). pinned_snapshot: the ancestor''s DuckLake snapshot a pinned fork reads a deferred table at (NULL: live).';

-- What the jobs area still holds for a dropped workspace's id (dataenv.workspace_leftovers): a
-- new workspace of the same id must not inherit records of tables it never wrote.
CREATE OR REPLACE FUNCTION dataenv.workspace_leftovers__jobs(workspace text)
RETURNS TABLE (kind text, detail text, created_by_request uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'materializations'::text, format('%s record(s) of lake %s', count(*), m.lake), NULL::uuid
      FROM dataenv.materializations m WHERE m.workspace = workspace_leftovers__jobs.workspace
     GROUP BY m.lake
$$;
COMMENT ON FUNCTION dataenv.workspace_leftovers__jobs(text) IS
    'Leftovers of a workspace id in the jobs area: materialization records.';

-- A dropped root takes its materialization records with it (its lake rows go too; its orphaned
-- forks no longer defer to it). A fork's records go when the lake cleanup of drop_fork dropped
-- its metadata schemas.
CREATE OR REPLACE FUNCTION dataenv.workspaces_forget_root_materializations() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM dataenv.materializations m WHERE m.workspace = OLD.id;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_forget_root_materializations() IS
    'AFTER DELETE of a root workspace: removes its materialization records.';
DROP TRIGGER IF EXISTS workspaces_forget_root_materializations ON dataenv.workspaces;
CREATE TRIGGER workspaces_forget_root_materializations AFTER DELETE ON dataenv.workspaces
    FOR EACH ROW WHEN (NOT OLD.is_fork) EXECUTE FUNCTION dataenv.workspaces_forget_root_materializations();

-- Tombstones for records of workspaces dropped before tombstones existed.
INSERT INTO dataenv.workspace_tombstones (id, owner, is_fork)
SELECT DISTINCT m.workspace, NULL::name, false
  FROM dataenv.materializations m
 WHERE NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = m.workspace)
ON CONFLICT (id) DO NOTHING;

REVOKE ALL ON FUNCTION dataenv.fork_materialization_rows(), dataenv.workspace_ancestors(text), dataenv.fork_lake_pin(text, text, text),
    dataenv.workspace_leftovers__jobs(text) FROM PUBLIC;
REVOKE ALL ON dataenv.materialization_all FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.run(text, text, interval, bigint), dataenv.materialize(text, text, text, text, boolean, interval)
  TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.materialization_list, dataenv.fork_materialization TO dataenv_user, dataenv_admin;
REVOKE ALL ON FUNCTION dataenv.fork_materialization_visible() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.fork_materialization_visible() TO dataenv_user, dataenv_admin;
