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
