-- The job kinds a satellite offers (docs/satellites.md, "Scope"): run and materialize, with the
-- control's SQL signatures. Workspaces, lakes and their members live in the control installation,
-- so only the shape of args is checked here; the control validates the rest and applies the
-- workspace's membership to the requester when the envelope runs, and a refusal fails the
-- request here with the control's text.

-- The part of a job's args this satellite can check without the control's state.
CREATE OR REPLACE FUNCTION dataenv.validate_forwarded_job(kind text, args jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(args->'workspace') IS DISTINCT FROM 'string' OR args->>'workspace' = '' THEN
        RAISE EXCEPTION '%: workspace is required (a string)', kind USING ERRCODE = '22023',
            HINT = 'Workspaces are the control installation''s: SELECT id FROM dataenv.workspaces there lists them.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_forwarded_job(text, jsonb) IS
    'Checks what a satellite can of a run or materialize request (a workspace is named); the control installation validates the rest when the envelope runs.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, description)
VALUES ('run', NULL, 'any', 'A DuckDB job in a workspace of the control installation (see dataenv.run); the control checks the workspace and its membership when it runs.'),
       ('materialize', NULL, 'any', 'Writes a query''s rows to a lake table of a workspace of the control installation (see dataenv.materialize); the control checks the workspace and its membership when it runs.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy, description = EXCLUDED.description;

CREATE OR REPLACE FUNCTION dataenv.job_timeout_arg(timeout interval) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN timeout IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('timeout_seconds', extract(epoch FROM timeout)) END
$$;
COMMENT ON FUNCTION dataenv.job_timeout_arg(interval) IS 'Internal: {"timeout_seconds": n} of a job''s timeout, {} for NULL.';

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
    'Requests a DuckDB job in a workspace of the control installation, as dataenv.run there does; it runs once the calling transaction commits and its result (cut at 256 KiB of JSON, or max_result_bytes up to 16 MiB) lands in this satellite''s row. Returns the request id.';

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
    'Requests that the rows of query be written to ducklake://<lake>/<table> of a workspace of the control installation (replace or append), as dataenv.materialize there does; it runs once the calling transaction commits, exactly once, and its outcome lands in this satellite''s row. Returns the request id.';

DO $grants$
DECLARE
    inst dataenv.installation;
BEGIN
    SELECT * INTO STRICT inst FROM dataenv.installation;
    REVOKE ALL ON FUNCTION dataenv.validate_forwarded_job(text, jsonb), dataenv.job_timeout_arg(interval),
        dataenv.run(text, text, interval, bigint), dataenv.materialize(text, text, text, text, boolean, interval) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION dataenv.validate_forwarded_job(text, jsonb), dataenv.job_timeout_arg(interval),
        dataenv.run(text, text, interval, bigint), dataenv.materialize(text, text, text, text, boolean, interval) TO %I, %I',
        inst.user_role, inst.admin_role);
END
$grants$;
