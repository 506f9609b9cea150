-- Forks made from a satellite (docs/satellites.md, "Scope"): create_fork and drop_fork with the
-- control's SQL signatures, on the control's workspaces. As for jobs, only the shape is checked
-- here; the control validates the rest and applies its policy to the requester when the
-- envelope runs.

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

CREATE OR REPLACE FUNCTION dataenv.create_fork(parent text, fork text, datatables jsonb DEFAULT '{}',
                                              shared_lakes text[] DEFAULT '{}', expires_in interval DEFAULT NULL,
                                              pin_lakes boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_fork', jsonb_build_object('parent', parent, 'fork', fork,
                                              'datatables', coalesce(datatables, '{}'::jsonb),
                                              'shared_lakes', to_jsonb(coalesce(shared_lakes, '{}'::text[])))
                           || CASE WHEN expires_in IS NULL THEN '{}'::jsonb
                                   ELSE jsonb_build_object('expires_in', expires_in::text) END
                           || jsonb_build_object('pin_lakes', coalesce(pin_lakes, false)))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_fork(text, text, jsonb, text[], interval, boolean) IS
    'Requests a fork named fork of the control installation''s workspace parent, as dataenv.create_fork there does (datatables, shared_lakes, expires_in, pin_lakes alike); it runs once the calling transaction commits and its outcome lands in this satellite''s row. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.drop_fork(fork text, cascade boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_fork', jsonb_build_object('fork', fork, 'cascade', coalesce(cascade, false)))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_fork(text, boolean) IS
    'Requests the drop of a fork of the control installation, as dataenv.drop_fork there does; it runs once the calling transaction commits and its outcome lands in this satellite''s row. Returns the request id.';

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
