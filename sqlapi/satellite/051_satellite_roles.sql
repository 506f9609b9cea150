-- A satellite's roles and authorization (docs/satellites.md). Roles are cluster-wide, so the
-- satellite has roles of its own, named in dataenv.installation: membership of dataenv_user or
-- dataenv_admin (the control's) grants nothing here, and this satellite's roles grant nothing in
-- any other database. Re-applied on every install of the satellite.
DO $roles$
DECLARE
    inst dataenv.installation;
    r name;
BEGIN
    SELECT * INTO STRICT inst FROM dataenv.installation;
    FOREACH r IN ARRAY ARRAY[inst.user_role, inst.admin_role] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN unique_violation OR duplicate_object THEN
                NULL;
            END;
        END IF;
    END LOOP;
    EXECUTE format('COMMENT ON ROLE %I IS %L', inst.user_role,
                   format('dataenv: members may call the dataenv SQL API of the satellite in database %s and see their own requests there', current_database()));
    EXECUTE format('COMMENT ON ROLE %I IS %L', inst.admin_role,
                   format('dataenv: members see, wait on and cancel every request of the satellite in database %s', current_database()));
    EXECUTE format('GRANT USAGE ON SCHEMA dataenv TO %I, %I', inst.user_role, inst.admin_role);
END
$roles$;

-- The satellite's own role names, for the policies and grants below and for people.
CREATE OR REPLACE FUNCTION dataenv.satellite_roles(OUT user_role name, OUT admin_role name)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.user_role, i.admin_role FROM dataenv.installation i $$;
COMMENT ON FUNCTION dataenv.satellite_roles() IS
    'The roles of this satellite installation: user_role (GRANT it to whoever may make requests here) and admin_role (sees and cancels every request here).';

-- plpgsql, as the control's (sqlapi/001): its plans are kept for the session.
CREATE OR REPLACE FUNCTION dataenv.is_dataenv_admin(role name) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (
        SELECT FROM pg_catalog.pg_roles r
         WHERE r.rolname = role
           AND (r.rolsuper
                OR pg_catalog.pg_has_role(r.oid, (SELECT i.admin_role FROM dataenv.installation i), 'MEMBER')
                OR pg_catalog.pg_has_role(r.oid, (SELECT n.nspowner FROM pg_catalog.pg_namespace n
                                                   WHERE n.nspname = 'dataenv'), 'MEMBER')));
END
$$;
COMMENT ON FUNCTION dataenv.is_dataenv_admin(name) IS
    'True for superusers, members of this satellite''s admin role and members of the dataenv schema''s owner (the installer, the sidecar''s role): this satellite''s administrators.';

CREATE OR REPLACE FUNCTION dataenv.may_ask_about(role name) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT FROM pg_catalog.pg_roles r
                    WHERE r.rolname = may_ask_about.role
                      AND pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER'))
        OR dataenv.is_dataenv_admin(session_user);
END
$$;
COMMENT ON FUNCTION dataenv.may_ask_about(name) IS
    'True when the session''s user is role (or a member of it) or an administrator of this satellite.';

-- One implementation, used at insert time and by the sidecar (connected here, to the origin)
-- before every attempt: the control database never decides who may use a satellite.
CREATE OR REPLACE FUNCTION dataenv.authorize_request(kind text, args jsonb, role name) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k record;
    user_role name := (dataenv.satellite_roles()).user_role;
BEGIN
    SELECT rk.policy INTO k FROM dataenv.request_kinds rk WHERE rk.kind = authorize_request.kind;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv request: unknown kind %', coalesce(to_json(kind)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'SELECT kind, description FROM dataenv.request_kinds lists the kinds a satellite offers.';
    END IF;
    IF role IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = role) THEN
        RAISE EXCEPTION '%: permission denied: requested_by % is not an existing role', kind, coalesce(to_json(role::text)::text, 'NULL')
            USING ERRCODE = '42501';
    END IF;
    IF NOT dataenv.may_ask_about(role) THEN
        RAISE EXCEPTION '%: permission denied: % may not make or check requests for %', kind, to_json(session_user::text)::text, to_json(role::text)::text
            USING ERRCODE = '42501', HINT = 'Make requests as yourself.';
    END IF;
    IF dataenv.is_dataenv_admin(role) THEN
        RETURN;
    END IF;
    IF NOT pg_catalog.pg_has_role(role, user_role, 'MEMBER') THEN
        RAISE EXCEPTION '%: permission denied: % is not a dataenv user of database %', kind, to_json(role::text)::text, to_json(current_database()::text)::text
            USING ERRCODE = '42501', HINT = format('An administrator grants it: GRANT %I TO %I;', user_role, role);
    END IF;
    IF k.policy = 'admin' THEN
        RAISE EXCEPTION '%: permission denied: % is not an administrator of this satellite', kind, to_json(role::text)::text
            USING ERRCODE = '42501', HINT = 'Ask an administrator of this satellite to make this request.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.authorize_request(text, jsonb, name) IS
    'Raises (42501, with what to do) unless role may make a request of kind here: an administrator of this satellite, or a member of its user role for kinds of policy any. Checked at insert and by the sidecar before every attempt.';

-- The kinds a satellite offers (docs/satellites.md says why only these); ping's validator is written
-- once for both installations (sqlapi/shared/006).
INSERT INTO dataenv.request_kinds (kind, validator, policy, description)
VALUES ('ping', 'dataenv.validate_ping(jsonb)'::regprocedure, 'any', 'Does nothing; health checks and benchmarks.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy, description = EXCLUDED.description;

CREATE OR REPLACE FUNCTION dataenv.validate_request(kind text, args jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CASE kind
    WHEN 'ping' THEN PERFORM dataenv.validate_ping(args);
    -- sqlapi/satellite/054_satellite_jobs.sql: the control validates the rest when it runs.
    WHEN 'run', 'materialize' THEN PERFORM dataenv.validate_forwarded_job(kind, args);
    WHEN 'create_fork', 'drop_fork' THEN PERFORM dataenv.validate_forwarded_fork(kind, args);  -- 055
    ELSE
        RAISE EXCEPTION 'dataenv request: kind "%" is not offered by a satellite installation', kind
            USING ERRCODE = '22023',
                  HINT = 'SELECT kind, description FROM dataenv.request_kinds lists the kinds a satellite offers; make other requests in the control database.';
    END CASE;
END
$$;
COMMENT ON FUNCTION dataenv.validate_request(text, jsonb) IS
    'Refuses a kind this satellite does not offer and runs the kind''s validator on args.';

DO $grants$
DECLARE
    inst dataenv.installation;
BEGIN
    SELECT * INTO STRICT inst FROM dataenv.installation;
    REVOKE ALL ON FUNCTION dataenv.authorize_request(text, jsonb, name), dataenv.may_ask_about(name),
        dataenv.is_dataenv_admin(name), dataenv.validate_request(text, jsonb), dataenv.validate_ping(jsonb),
        dataenv.satellite_roles() FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION dataenv.authorize_request(text, jsonb, name), dataenv.may_ask_about(name),
        dataenv.is_dataenv_admin(name), dataenv.validate_request(text, jsonb), dataenv.validate_ping(jsonb),
        dataenv.satellite_roles() TO %I, %I', inst.user_role, inst.admin_role);
    EXECUTE format('GRANT SELECT ON dataenv.request_kinds, dataenv.installation TO %I, %I', inst.user_role, inst.admin_role);
END
$grants$;
