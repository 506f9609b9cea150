-- ---------------------------------------------------------------------------------------------
-- Request functions
-- ---------------------------------------------------------------------------------------------

-- A job's timeout travels as timeout_seconds (a number: what an INSERT of one's own writes too).
CREATE OR REPLACE FUNCTION dataenv.job_timeout_arg(timeout interval) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN timeout IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('timeout_seconds', extract(epoch FROM timeout)) END
$$;
COMMENT ON FUNCTION dataenv.job_timeout_arg(interval) IS 'Internal: {"timeout_seconds": n} of a job''s timeout, {} for NULL.';

-- timeout, then max_result_bytes, are new in this signature: the old ones go (install
-- re-applies this file).
DROP FUNCTION IF EXISTS dataenv.run(text, text);
DROP FUNCTION IF EXISTS dataenv.run(text, text, interval);
CREATE OR REPLACE FUNCTION dataenv.run(workspace text, sql text, timeout interval DEFAULT NULL,
                                       max_result_bytes bigint DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('run', jsonb_build_object('workspace', workspace, 'sql', sql) || dataenv.job_timeout_arg(timeout)
                   || CASE WHEN max_result_bytes IS NULL THEN '{}'::jsonb
                           ELSE jsonb_build_object('max_result_bytes', max_result_bytes) END)
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.run(text, text, interval, bigint) IS
    'Requests a DuckDB job for a workspace. In the SQL, ATTACH ''ducklake://<lake>'' AS x and ATTACH ''datatable://<name>'' AS y are resolved for the workspace (in a fork: writes go to the fork''s namespace, reads of tables it has not materialized defer to an ancestor). The result holds the last statement''s columns and rows, cut at 256 KiB of JSON with a truncation marker; max_result_bytes raises that up to 16 MiB (16777216). timeout: a wall-clock limit shorter than the workspace''s job timeout (dataenv.job_limit_list). Returns the request id.';

-- seed_from_parent is new in this signature: the old one goes (install re-applies this file).
DROP FUNCTION IF EXISTS dataenv.materialize(text, text, text, text);
-- and so is timeout.
DROP FUNCTION IF EXISTS dataenv.materialize(text, text, text, text, boolean);
CREATE OR REPLACE FUNCTION dataenv.materialize(workspace text, target text, query text, strategy text DEFAULT 'replace',
                                              seed_from_parent boolean DEFAULT true, timeout interval DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('materialize', jsonb_build_object('workspace', workspace, 'target', target, 'query', query,
                                              'strategy', coalesce(strategy, 'replace'),
                                              'seed_from_parent', coalesce(seed_from_parent, true))
                             || dataenv.job_timeout_arg(timeout))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.materialize(text, text, text, text, boolean, interval) IS
    'Requests that the rows of query (DuckDB SQL; its last statement is the SELECT, earlier statements may ATTACH) be written to ducklake://<lake>/<table> of the workspace: replace (CREATE OR REPLACE TABLE) or append (created when missing). In a fork, an append onto a table the fork reads from an ancestor starts the fork''s table from the ancestor''s rows (seed_from_parent, default true; false starts it empty). The write goes to the workspace''s namespace; the materialization (status, snapshot, row count) is recorded. timeout: a wall-clock limit shorter than the workspace''s job timeout. Returns the request id.';
