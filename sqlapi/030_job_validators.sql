-- DuckDB jobs: run and materialize requests, the record of materializations, and the per-fork
-- view of which lake tables a fork reads from an ancestor (deferred), owns (fork-materialized),
-- or does not see (absent).


-- ---------------------------------------------------------------------------------------------
-- Validators
-- ---------------------------------------------------------------------------------------------

-- The workspace exists and the caller may use it. A workspace the caller may not use is refused
-- the same way whether it exists or not: its id is not the caller's to learn.
CREATE OR REPLACE FUNCTION dataenv.check_job_workspace(fn text, workspace text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF workspace IS NULL OR workspace = '' THEN
        RAISE EXCEPTION '%: workspace is required', fn USING ERRCODE = '22023';
    END IF;
    IF NOT dataenv.can_use_workspace(workspace) THEN
        RAISE EXCEPTION '%: % may not use workspace % (or there is no such workspace)', fn, current_user, to_json(workspace)::text
            USING ERRCODE = '42501', HINT = 'The workspace''s owner grants it: dataenv.grant_workspace(workspace, role).';
    END IF;
    IF NOT dataenv.workspace_exists(workspace) THEN
        RAISE EXCEPTION '%: no workspace named %', fn, to_json(workspace)::text USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_job_workspace(text, text) IS
    'Internal: raises unless the workspace exists and the caller may use it (a workspace the caller may not use is refused whether it exists or not).';

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
        OR (args->>'max_result_bytes')::numeric NOT BETWEEN 1 AND 16777216) THEN
        RAISE EXCEPTION '%: max_result_bytes must be a number of bytes between 1 and 16777216 (16 MiB)', fn
            USING ERRCODE = '22023',
                  HINT = 'A result is kept in dataenv.requests; for more rows, materialize the query into a lake table (dataenv.materialize).';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_job_keys(text, jsonb, text[]) IS 'Internal: refuses unknown job arguments.';

CREATE OR REPLACE FUNCTION dataenv.validate_run(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_job_keys('run', args, ARRAY['workspace', 'sql', 'max_result_bytes', 'timeout_seconds']);
    IF jsonb_typeof(args->'workspace') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'run: workspace is required (a string)' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_workspace('run', args->>'workspace');
    IF jsonb_typeof(args->'sql') IS DISTINCT FROM 'string' OR btrim(args->>'sql', E' \t\r\n;') = '' THEN
        RAISE EXCEPTION 'run: sql is required (DuckDB SQL text)' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_timeout('run', args);
END
$$;
COMMENT ON FUNCTION dataenv.validate_run(jsonb) IS 'Validates the args of a run request: workspace, sql[, max_result_bytes, timeout_seconds].';

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

-- SECURITY INVOKER like every validator: check_job_workspace must see the caller, not the owner
-- (as a definer, can_use_workspace saw the owner and let anyone write any workspace's lakes).
CREATE OR REPLACE FUNCTION dataenv.validate_materialize(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
BEGIN
    PERFORM dataenv.check_job_keys('materialize', args, ARRAY['workspace', 'target', 'query', 'strategy', 'max_result_bytes',
                                                          'seed_from_parent', 'timeout_seconds']);
    IF jsonb_typeof(args->'workspace') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'materialize: workspace is required (a string)' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_workspace('materialize', args->>'workspace');
    IF jsonb_typeof(args->'target') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'materialize: target is required (ducklake://<lake>/<table>)' USING ERRCODE = '22023';
    END IF;
    t := dataenv.parse_lake_target('materialize', args->>'target');
    IF NOT EXISTS (SELECT FROM dataenv.lake_info l WHERE l.workspace = args->>'workspace' AND l.name = t.lake) THEN
        RAISE EXCEPTION 'materialize: workspace % has no lake named %', to_json(args->>'workspace')::text, to_json(t.lake)::text
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.lake_info WHERE workspace = ... lists them.';
    END IF;
    IF jsonb_typeof(args->'query') IS DISTINCT FROM 'string' OR btrim(args->>'query', E' \t\r\n;') = '' THEN
        RAISE EXCEPTION 'materialize: query is required (DuckDB SQL whose last statement is the SELECT to write)' USING ERRCODE = '22023';
    END IF;
    IF args ? 'strategy' AND (jsonb_typeof(args->'strategy') <> 'string' OR args->>'strategy' NOT IN ('replace', 'append')) THEN
        RAISE EXCEPTION 'materialize: strategy must be replace or append (got %)', (args->'strategy')::text USING ERRCODE = '22023';
    END IF;
    IF args ? 'seed_from_parent' AND jsonb_typeof(args->'seed_from_parent') <> 'boolean' THEN
        RAISE EXCEPTION 'materialize: seed_from_parent must be true or false' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_timeout('materialize', args);
END
$$;
COMMENT ON FUNCTION dataenv.validate_materialize(jsonb) IS
    'Validates the args of a materialize request: workspace, target (ducklake://<lake>/<table>), query, strategy (replace or append), seed_from_parent (boolean), timeout_seconds.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('run', 'dataenv.validate_run(jsonb)'::regprocedure, 'workspace_member', 'workspace',
        'Runs DuckDB SQL for a workspace; ATTACH ''ducklake://<lake>'' and ''datatable://<name>'' are resolved for it.'),
       ('materialize', 'dataenv.validate_materialize(jsonb)'::regprocedure, 'workspace_member', 'workspace',
        'Writes a query''s rows to a lake table of a workspace (replace or append) and records the materialization.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;
