-- The job kinds a satellite offers (docs/satellites.md, "Scope"): run and materialize, with the
-- control's SQL signatures. Workspaces, lakes and their members live in the control installation,
-- so only the shape of args is checked here; the control validates the rest and applies the
-- workspace's membership to the requester when the envelope runs, and a refusal fails the
-- request here with the control's text. run, materialize and job_timeout_arg are written once for
-- both installations (sqlapi/shared/006); this file grants them to the satellite's roles.

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
