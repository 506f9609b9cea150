-- Forks made from a satellite (docs/satellites.md, "Scope"): create_fork and drop_fork with the
-- control's SQL signatures, on the control's workspaces. As for jobs, only the shape is checked
-- here; the control validates the rest and applies its policy to the requester when the
-- envelope runs. create_fork and drop_fork are written once for both
-- installations (sqlapi/shared/006); this file grants them to the satellite's roles.

CREATE OR REPLACE FUNCTION dataenv.validate_forwarded_fork(kind text, args jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOREACH k IN ARRAY CASE kind WHEN 'create_fork' THEN ARRAY['parent', 'fork'] ELSE ARRAY['fork'] END LOOP
        IF jsonb_typeof(args->k) IS DISTINCT FROM 'string' OR args->>k = '' THEN
            RAISE EXCEPTION '%: % is required (a workspace id)', kind, k USING ERRCODE = '22023',
                HINT = 'Workspaces are the control installation''s: SELECT id FROM dataenv.workspaces there lists them.';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.validate_forwarded_fork(text, jsonb) IS
    'Checks what a satellite can of a create_fork or drop_fork request (the workspaces are named); the control installation validates the rest when the envelope runs.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, description)
VALUES ('create_fork', NULL, 'any', 'Forks a workspace of the control installation (see dataenv.create_fork); the control checks the parent and its membership when it runs.'),
       ('drop_fork', NULL, 'any', 'Drops a fork of the control installation (see dataenv.drop_fork); the control checks that the requester owns it when it runs.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy, description = EXCLUDED.description;

DO $grants$
DECLARE
    inst dataenv.installation;
BEGIN
    SELECT * INTO STRICT inst FROM dataenv.installation;
    REVOKE ALL ON FUNCTION dataenv.validate_forwarded_fork(text, jsonb),
        dataenv.create_fork(text, text, jsonb, text[], interval, boolean), dataenv.drop_fork(text, boolean) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION dataenv.validate_forwarded_fork(text, jsonb),
        dataenv.create_fork(text, text, jsonb, text[], interval, boolean), dataenv.drop_fork(text, boolean) TO %I, %I',
        inst.user_role, inst.admin_role);
END
$grants$;
