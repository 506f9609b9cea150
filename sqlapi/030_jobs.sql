-- DuckDB jobs: run and materialize requests, the record of materializations, and the per-fork
-- view of which lake tables a fork reads from an ancestor (deferred), owns (fork-materialized),
-- or does not see (absent).

-- ---------------------------------------------------------------------------------------------
-- Validators
-- ---------------------------------------------------------------------------------------------

-- The workspace exists and the caller may use it (dataenv.can_use_workspace, when the
-- workspaces area is installed).
CREATE OR REPLACE FUNCTION dataenv.check_job_workspace(fn text, workspace text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    allowed boolean;
BEGIN
    PERFORM dataenv.require_lake_workspace(fn, workspace);
    IF pg_catalog.to_regprocedure('dataenv.can_use_workspace(text)') IS NOT NULL THEN
        EXECUTE 'SELECT dataenv.can_use_workspace($1)' INTO allowed USING workspace;
        IF NOT allowed THEN
            RAISE EXCEPTION '%: % may not use workspace %', fn, current_user, to_json(workspace)::text
                USING ERRCODE = '42501', HINT = 'A workspace admin grants it: dataenv.grant_workspace(workspace, role).';
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_job_workspace(text, text) IS
    'Internal: raises unless the workspace exists and the caller may use it.';

CREATE OR REPLACE FUNCTION dataenv.check_job_keys(fn text, args jsonb, allowed text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF NOT k = ANY (allowed) THEN
            RAISE EXCEPTION '%: unknown argument %', fn, to_json(k)::text USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF args ? 'max_result_bytes' AND (jsonb_typeof(args->'max_result_bytes') <> 'number'
        OR (args->>'max_result_bytes')::numeric NOT BETWEEN 1 AND 104857600) THEN
        RAISE EXCEPTION '%: max_result_bytes must be a number of bytes between 1 and 104857600', fn USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_job_keys(text, jsonb, text[]) IS 'Internal: refuses unknown job arguments.';

CREATE OR REPLACE FUNCTION dataenv.validate_run(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_job_keys('run', args, ARRAY['workspace', 'sql', 'max_result_bytes']);
    IF jsonb_typeof(args->'workspace') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'run: workspace is required (a string)' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_workspace('run', args->>'workspace');
    IF jsonb_typeof(args->'sql') IS DISTINCT FROM 'string' OR btrim(args->>'sql', E' \t\r\n;') = '' THEN
        RAISE EXCEPTION 'run: sql is required (DuckDB SQL text)' USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_run(jsonb) IS 'Validates the args of a run request: workspace, sql[, max_result_bytes].';

-- 'ducklake://<lake>/<table>' → (lake, table), or a clear error.
CREATE OR REPLACE FUNCTION dataenv.parse_lake_target(fn text, target text, OUT lake text, OUT table_name text)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m text[];
BEGIN
    m := regexp_match(coalesce(target, ''), '^ducklake://([a-z][a-z0-9_]{0,62})/([a-z][a-z0-9_]{0,62})$');
    IF m IS NULL THEN
        RAISE EXCEPTION '%: target % is not ducklake://<lake>/<table>', fn, coalesce(to_json(target)::text, 'NULL')
            USING ERRCODE = '22023',
                  DETAIL = 'Lake and table names are lowercase ASCII letters, digits and _, starting with a letter.';
    END IF;
    lake := m[1];
    table_name := m[2];
END
$$;
COMMENT ON FUNCTION dataenv.parse_lake_target(text, text) IS 'Internal: splits ducklake://<lake>/<table>.';

CREATE OR REPLACE FUNCTION dataenv.validate_materialize(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
BEGIN
    PERFORM dataenv.check_job_keys('materialize', args, ARRAY['workspace', 'target', 'query', 'strategy', 'max_result_bytes']);
    IF jsonb_typeof(args->'workspace') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'materialize: workspace is required (a string)' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_workspace('materialize', args->>'workspace');
    IF jsonb_typeof(args->'target') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'materialize: target is required (ducklake://<lake>/<table>)' USING ERRCODE = '22023';
    END IF;
    t := dataenv.parse_lake_target('materialize', args->>'target');
    IF NOT EXISTS (SELECT FROM dataenv.lakes l WHERE l.workspace = args->>'workspace' AND l.name = t.lake) THEN
        RAISE EXCEPTION 'materialize: workspace % has no lake named %', to_json(args->>'workspace')::text, to_json(t.lake)::text
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.lake_info WHERE workspace = ... lists them.';
    END IF;
    IF jsonb_typeof(args->'query') IS DISTINCT FROM 'string' OR btrim(args->>'query', E' \t\r\n;') = '' THEN
        RAISE EXCEPTION 'materialize: query is required (DuckDB SQL whose last statement is the SELECT to write)' USING ERRCODE = '22023';
    END IF;
    IF args ? 'strategy' AND (jsonb_typeof(args->'strategy') <> 'string' OR args->>'strategy' NOT IN ('replace', 'append')) THEN
        RAISE EXCEPTION 'materialize: strategy must be replace or append (got %)', (args->'strategy')::text USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_materialize(jsonb) IS
    'Validates the args of a materialize request: workspace, target (ducklake://<lake>/<table>), query, strategy (replace or append).';

INSERT INTO dataenv.request_kinds (kind, validator, description)
VALUES ('run', 'dataenv.validate_run(jsonb)'::regprocedure,
        'Runs DuckDB SQL for a workspace; ATTACH ''ducklake://<lake>'' and ''datatable://<name>'' are resolved for it.'),
       ('materialize', 'dataenv.validate_materialize(jsonb)'::regprocedure,
        'Writes a query''s rows to a lake table of a workspace (replace or append) and records the materialization.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, description = EXCLUDED.description;

-- ---------------------------------------------------------------------------------------------
-- Request functions
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.run(workspace text, sql text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('run', jsonb_build_object('workspace', workspace, 'sql', sql))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.run(text, text) IS
    'Requests a DuckDB job for a workspace. In the SQL, ATTACH ''ducklake://<lake>'' AS x and ATTACH ''datatable://<name>'' AS y are resolved for the workspace (in a fork: writes go to the fork''s namespace, reads of tables it has not materialized defer to an ancestor). The result holds the last statement''s columns and rows (bounded). Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.materialize(workspace text, target text, query text, strategy text DEFAULT 'replace') RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('materialize', jsonb_build_object('workspace', workspace, 'target', target, 'query', query,
                                              'strategy', coalesce(strategy, 'replace')))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.materialize(text, text, text, text) IS
    'Requests that the rows of query (DuckDB SQL; its last statement is the SELECT, earlier statements may ATTACH) be written to ducklake://<lake>/<table> of the workspace: replace (CREATE OR REPLACE TABLE) or append (created when missing). The write goes to the workspace''s namespace; the materialization (status, snapshot, row count) is recorded. Returns the request id.';

-- ---------------------------------------------------------------------------------------------
-- Materializations
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.materialization_all AS
SELECT DISTINCT ON (workspace, lake, table_name)
       workspace, lake, table_name, status, strategy, snapshot_id, row_count, columns, metadata_schema,
       request_id, error, created_at
  FROM dataenv.materializations
 ORDER BY workspace, lake, table_name, id DESC;
COMMENT ON VIEW dataenv.materialization_all IS 'Internal: the latest materialization of each lake table per workspace.';

CREATE OR REPLACE VIEW dataenv.materialization_list WITH (security_barrier) AS
SELECT * FROM dataenv.materialization_all WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.materialization_list IS 'The latest materialization of each lake table, in the workspaces the caller may use.';

-- The ancestors of a workspace, nearest first (depth 1 = parent). Reads the workspaces area's
-- table (id, parent, is_fork) dynamically so this file installs on its own.
CREATE OR REPLACE FUNCTION dataenv.workspace_ancestors(workspace text)
RETURNS TABLE (depth integer, ancestor text, is_fork boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regclass('dataenv.workspaces') IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $q$
        WITH RECURSIVE chain(depth, id, parent, is_fork) AS (
            SELECT 0, w.id, w.parent, w.is_fork FROM dataenv.workspaces w WHERE w.id = $1
            UNION ALL
            SELECT c.depth + 1, w.id, w.parent, w.is_fork
              FROM chain c JOIN dataenv.workspaces w ON w.id = c.parent
             WHERE c.depth < 100
        )
        SELECT depth, id, is_fork FROM chain WHERE depth > 0 ORDER BY depth $q$ USING workspace;
END
$$;
COMMENT ON FUNCTION dataenv.workspace_ancestors(text) IS 'The fork chain above a workspace, nearest ancestor first.';

CREATE OR REPLACE FUNCTION dataenv.fork_materialization_rows()
RETURNS TABLE (workspace text, lake text, table_name text, state text, from_workspace text, snapshot_id bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF pg_catalog.to_regclass('dataenv.workspaces') IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $q$
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
         ORDER BY 1, 2, 3 $q$;
END
$$;
COMMENT ON FUNCTION dataenv.fork_materialization_rows() IS 'Internal: the rows of dataenv.fork_materialization.';

CREATE OR REPLACE VIEW dataenv.fork_materialization WITH (security_barrier) AS
SELECT * FROM dataenv.fork_materialization_rows() r WHERE dataenv.can_use_workspace(r.workspace);
COMMENT ON VIEW dataenv.fork_materialization IS
    'Per fork the caller may use, isolated lake and table: deferred (read from from_workspace, the nearest ancestor that materialized it), fork-materialized (the fork wrote its own), or absent (known in the chain, but no ancestor''s latest run succeeded).';

REVOKE ALL ON FUNCTION dataenv.fork_materialization_rows(), dataenv.workspace_ancestors(text) FROM PUBLIC;
REVOKE ALL ON dataenv.materialization_all FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.run(text, text), dataenv.materialize(text, text, text, text)
  TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.materialization_list, dataenv.fork_materialization TO dataenv_user, dataenv_admin;
