-- Roles are cluster-wide, so they are created only when missing and never dropped by uninstall
-- (another installation in the cluster may use them). Advisory locks are per database, so two
-- installs in different databases can race here: losing the race is fine.
DO $roles$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['dataenv_user', 'dataenv_admin'] LOOP
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN unique_violation OR duplicate_object THEN
                NULL;
            END;
        END IF;
    END LOOP;
END
$roles$;

COMMENT ON ROLE dataenv_user IS 'dataenv: members may call the dataenv SQL API and see their own requests';
COMMENT ON ROLE dataenv_admin IS 'dataenv: members see, wait on and cancel every request';

GRANT USAGE ON SCHEMA dataenv TO dataenv_user, dataenv_admin;

-- Advisory lock keys: a fixed dataenv class id per purpose plus a hash of the resource, so that
-- dataenv's locks never collide with an application's single-bigint advisory locks.
CREATE OR REPLACE FUNCTION dataenv.lock_class(purpose text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE purpose
        WHEN 'lifecycle' THEN 1685021537  -- one per cluster
        WHEN 'gate'      THEN 1685021538  -- one per in-flight request, held by the sidecar
        WHEN 'leader'    THEN 1685021539  -- the sidecar leader election
        WHEN 'install'   THEN 1685021540  -- serializes install/uninstall
        WHEN 'workspace' THEN 1685021550  -- one per workspace id, held by create_fork/drop_fork
        WHEN 'schema_template' THEN 1685021551  -- one per datatable entry, held while its schema template is used or rebuilt
        WHEN 'fork_expiry' THEN 1685021552  -- one per installation, held while expired forks' drops are filed
    END
$$;
COMMENT ON FUNCTION dataenv.lock_class(text) IS
    'Advisory lock class id (first key) that dataenv uses for a purpose: lifecycle, gate, leader, install, workspace, schema_template or fork_expiry.';
