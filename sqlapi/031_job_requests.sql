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
