-- Clusters: registration (secrets kept out of every view and request), setup, databases and
-- datatable roles on them, the lifecycle lock, and the uses that keep a database from being dropped.
--
-- Lock: every function here that saves a cluster's configuration takes the cluster's lifecycle
-- lock as a transaction advisory lock with the key
--     (dataenv.lock_class('lifecycle'), hashtext(<cluster name>))
-- The sidecar takes the same key as a session lock (sidecar/lock) around every side effect that
-- changes which databases or roles exist, and reads the configuration under it.

-- ---------------------------------------------------------------------------------------------
-- Names
-- ---------------------------------------------------------------------------------------------

-- The rule for every name a user chooses (clusters, databases, datatable roles), mirrored by
-- cluster.ValidateName in Go: 1 to 63 bytes of lowercase ASCII letters, digits and underscores,
-- starting with a letter. Quotes, semicolons, whitespace, upper case and non-ASCII characters are
-- refused rather than quoted or normalized: a name then means the same thing in psql without
-- quoting, byte length equals character length, and no two names differ only by Unicode
-- normalization or case. Prefixes pg_ (PostgreSQL's) and dataenv_ (dataenv's own databases and
-- roles) are reserved, as are the databases postgres/template0/template1 and the role names
-- PostgreSQL reserves.
CREATE OR REPLACE FUNCTION dataenv.check_name(what text, value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF what IS NULL OR what NOT IN ('cluster', 'database', 'role') THEN
        RAISE EXCEPTION 'dataenv.check_name: what must be cluster, database or role' USING ERRCODE = '22023';
    END IF;
    IF value IS NULL OR value = '' THEN
        RAISE EXCEPTION 'dataenv: % name is required (got %)', what, coalesce(to_json(value)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(value) > 63 THEN
        RAISE EXCEPTION 'dataenv: % name % is % bytes; the limit is 63 (PostgreSQL would truncate it)',
            what, to_json(left(value, 80))::text, octet_length(value) USING ERRCODE = '22023';
    END IF;
    IF value !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'dataenv: % name % is not allowed', what, to_json(value)::text
            USING ERRCODE = '22023',
                  DETAIL = 'Names are lowercase ASCII letters, digits and underscores, starting with a letter: no quotes, semicolons, whitespace, upper case or non-ASCII characters.';
    END IF;
    IF value LIKE 'pg\_%' OR value LIKE 'dataenv\_%' THEN
        RAISE EXCEPTION 'dataenv: % name % uses a reserved prefix (pg_ or dataenv_)', what, to_json(value)::text
            USING ERRCODE = '22023';
    END IF;
    IF what = 'database' AND value IN ('postgres', 'template0', 'template1') THEN
        RAISE EXCEPTION 'dataenv: database name % is reserved', to_json(value)::text USING ERRCODE = '22023';
    END IF;
    IF what = 'role' AND value IN ('public', 'none', 'current_user', 'current_role', 'session_user', 'user') THEN
        RAISE EXCEPTION 'dataenv: role name % is reserved', to_json(value)::text USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_name(text, text) IS
    'Raises unless value is an acceptable user-chosen name of a cluster, database or role: 1-63 bytes of [a-z0-9_] starting with a letter, no pg_/dataenv_ prefix, not reserved.';

-- Managed role names (setup's application and replication users) must carry the dataenv_ prefix,
-- so that they can never collide with a user-chosen name.
CREATE OR REPLACE FUNCTION dataenv.check_managed_role_name(value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value !~ '^dataenv_[a-z0-9_]+$' OR octet_length(value) > 63 THEN
        RAISE EXCEPTION 'dataenv: managed role name % is not allowed', coalesce(to_json(value)::text, 'NULL')
            USING ERRCODE = '22023',
                  DETAIL = 'Managed role names are dataenv_ followed by lowercase ASCII letters, digits and underscores, at most 63 bytes.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_managed_role_name(text) IS
    'Raises unless value is an acceptable name for a managed role (dataenv_[a-z0-9_]+, at most 63 bytes).';

-- ---------------------------------------------------------------------------------------------
-- The lifecycle lock
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.lock_cluster_lifecycle(cluster text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_advisory_xact_lock(dataenv.lock_class('lifecycle'), pg_catalog.hashtext(cluster))
$$;
COMMENT ON FUNCTION dataenv.lock_cluster_lifecycle(text) IS
    'Takes the lifecycle lock of a cluster until the end of the transaction. Every function that saves configuration naming a cluster or its databases calls it first; the sidecar takes the same key around its side effects.';

-- ---------------------------------------------------------------------------------------------
-- Reading clusters (no secrets)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.cluster_info AS
SELECT c.name,
       c.kind,
       c.host,
       c.port,
       c.admin_user,
       c.sslmode,
       c.root_certificate_pem IS NOT NULL AS has_root_certificate,
       c.app_role,
       c.replication_role,
       c.set_up_for,
       c.set_up_at,
       c.set_up_for IS NOT DISTINCT FROM (c.host || ':' || c.port) AS ready,
       c.created_at,
       c.updated_at
  FROM dataenv.clusters c;
COMMENT ON VIEW dataenv.cluster_info IS
    'Registered clusters without their secrets; ready means setup succeeded on the current host:port.';

CREATE OR REPLACE VIEW dataenv.managed_database_list AS
SELECT cluster, name, created_by_request, for_workspace, template, created_at
  FROM dataenv.managed_databases;
COMMENT ON VIEW dataenv.managed_database_list IS 'Databases dataenv created, per cluster (the authoritative ownership record).';

CREATE OR REPLACE VIEW dataenv.datatable_role_list AS
SELECT cluster, role, description, created_by_request, created_at
  FROM dataenv.datatable_roles;
COMMENT ON VIEW dataenv.datatable_role_list IS 'Datatable roles dataenv created, per cluster.';

-- Internal: the cluster row or a clear error.
CREATE OR REPLACE FUNCTION dataenv.require_cluster(fn text, cluster text) RETURNS dataenv.clusters
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    IF cluster IS NULL OR cluster = '' THEN
        RAISE EXCEPTION '%: cluster is required', fn USING ERRCODE = '22023';
    END IF;
    SELECT * INTO c FROM dataenv.clusters WHERE name = cluster;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no cluster named %', fn, to_json(cluster)::text
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.cluster_info lists the clusters.';
    END IF;
    RETURN c;
END
$$;
COMMENT ON FUNCTION dataenv.require_cluster(text, text) IS 'Internal: returns the cluster row or raises a clear error naming fn.';

-- ---------------------------------------------------------------------------------------------
-- Registration (dataenv_admin)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.check_cluster_connection(fn text, host text, port integer, admin_user text,
                                                           sslmode text, root_certificate_pem text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF host IS NULL OR host !~ '^[A-Za-z0-9._:%/-]+$' OR octet_length(host) > 255 THEN
        RAISE EXCEPTION '%: host % is not a host name, IP address or socket directory', fn, coalesce(to_json(host)::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF port IS NULL OR port NOT BETWEEN 1 AND 65535 THEN
        RAISE EXCEPTION '%: port must be between 1 and 65535 (got %)', fn, coalesce(port::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF admin_user IS NULL OR admin_user = '' OR octet_length(admin_user) > 63 OR admin_user ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '%: admin_user must be an existing role name of 1 to 63 bytes', fn USING ERRCODE = '22023';
    END IF;
    IF sslmode IS NULL OR sslmode NOT IN ('disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full') THEN
        RAISE EXCEPTION '%: sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full (got %)',
            fn, coalesce(to_json(sslmode)::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF root_certificate_pem IS NOT NULL AND position('-----BEGIN CERTIFICATE-----' IN root_certificate_pem) = 0 THEN
        RAISE EXCEPTION '%: root_certificate_pem must hold PEM certificates (-----BEGIN CERTIFICATE-----)', fn
            USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_cluster_connection(text, text, integer, text, text, text) IS
    'Internal: validates the connection settings of a cluster registration.';

CREATE OR REPLACE FUNCTION dataenv.register_cluster(name text, host text, port integer, admin_user text,
                                                   admin_password text, sslmode text DEFAULT 'verify-full',
                                                   root_certificate_pem text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_name('cluster', name);
    IF name = 'instance' THEN
        RAISE EXCEPTION 'dataenv.register_cluster: the name "instance" is the control database''s own cluster'
            USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_cluster_connection('dataenv.register_cluster', host, port, admin_user, sslmode, root_certificate_pem);
    IF admin_password IS NULL OR admin_password = '' THEN
        RAISE EXCEPTION 'dataenv.register_cluster: admin_password is required' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.lock_cluster_lifecycle(name);
    IF EXISTS (SELECT FROM dataenv.clusters c WHERE c.name = register_cluster.name) THEN
        RAISE EXCEPTION 'dataenv.register_cluster: cluster % already exists', to_json(name)::text
            USING ERRCODE = '23505', HINT = 'Use dataenv.update_cluster to change it.';
    END IF;
    INSERT INTO dataenv.clusters (name, kind, host, port, admin_user, sslmode, root_certificate_pem)
    VALUES (name, 'external', host, port, admin_user, sslmode, root_certificate_pem);
    INSERT INTO dataenv.cluster_secrets (cluster, admin_password) VALUES (name, admin_password);
END
$$;
COMMENT ON FUNCTION dataenv.register_cluster(text, text, integer, text, text, text, text) IS
    'Registers an external cluster dataenv administers as admin_user. The password is readable by the sidecar''s role only. Run dataenv.setup_cluster(name) next.';

CREATE OR REPLACE FUNCTION dataenv.update_cluster(name text, host text DEFAULT NULL, port integer DEFAULT NULL,
                                                 admin_user text DEFAULT NULL, admin_password text DEFAULT NULL,
                                                 sslmode text DEFAULT NULL, root_certificate_pem text DEFAULT NULL,
                                                 clear_root_certificate boolean DEFAULT false,
                                                 app_role text DEFAULT NULL, replication_role text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
    fn constant text := 'dataenv.update_cluster';
BEGIN
    c := dataenv.require_cluster(fn, name);
    PERFORM dataenv.lock_cluster_lifecycle(name);
    SELECT * INTO c FROM dataenv.clusters WHERE clusters.name = update_cluster.name FOR UPDATE;
    IF c.kind = 'instance' AND (host IS NOT NULL OR port IS NOT NULL OR admin_user IS NOT NULL OR admin_password IS NOT NULL
                                OR sslmode IS NOT NULL OR root_certificate_pem IS NOT NULL OR clear_root_certificate) THEN
        RAISE EXCEPTION '%: the instance cluster is reached with the sidecar''s own DSN; only app_role and replication_role can change', fn
            USING ERRCODE = '22023';
    END IF;
    IF admin_password = '' THEN
        RAISE EXCEPTION '%: admin_password must not be empty', fn USING ERRCODE = '22023';
    END IF;
    IF root_certificate_pem IS NOT NULL AND clear_root_certificate THEN
        RAISE EXCEPTION '%: give root_certificate_pem or clear_root_certificate, not both', fn USING ERRCODE = '22023';
    END IF;
    IF app_role IS NOT NULL OR replication_role IS NOT NULL THEN
        PERFORM dataenv.check_managed_role_name(coalesce(app_role, c.app_role));
        PERFORM dataenv.check_managed_role_name(coalesce(replication_role, c.replication_role));
        IF coalesce(app_role, c.app_role) = coalesce(replication_role, c.replication_role) THEN
            RAISE EXCEPTION '%: app_role and replication_role must differ', fn USING ERRCODE = '22023';
        END IF;
        IF (coalesce(app_role, c.app_role) <> c.app_role OR coalesce(replication_role, c.replication_role) <> c.replication_role)
           AND (EXISTS (SELECT FROM dataenv.managed_databases d WHERE d.cluster = c.name)
                OR EXISTS (SELECT FROM dataenv.datatable_roles r WHERE r.cluster = c.name)) THEN
            RAISE EXCEPTION '%: cluster % has managed databases or datatable roles; its managed roles cannot change', fn, to_json(c.name)::text
                USING ERRCODE = '55000';
        END IF;
    END IF;
    IF c.kind = 'external' THEN
        PERFORM dataenv.check_cluster_connection(fn, coalesce(host, c.host), coalesce(port, c.port),
            coalesce(admin_user, c.admin_user), coalesce(sslmode, c.sslmode),
            CASE WHEN clear_root_certificate THEN NULL ELSE coalesce(root_certificate_pem, c.root_certificate_pem) END);
    END IF;
    UPDATE dataenv.clusters AS t
       SET host = coalesce(update_cluster.host, t.host),
           port = coalesce(update_cluster.port, t.port),
           admin_user = coalesce(update_cluster.admin_user, t.admin_user),
           sslmode = coalesce(update_cluster.sslmode, t.sslmode),
           root_certificate_pem = CASE WHEN clear_root_certificate THEN NULL
                                       ELSE coalesce(update_cluster.root_certificate_pem, t.root_certificate_pem) END,
           -- new managed roles or a new admin (whose membership setup converges): setup again
           set_up_for = CASE WHEN coalesce(update_cluster.app_role, t.app_role) <> t.app_role
                               OR coalesce(update_cluster.replication_role, t.replication_role) <> t.replication_role
                               OR coalesce(update_cluster.admin_user, t.admin_user) IS DISTINCT FROM t.admin_user
                             THEN NULL ELSE t.set_up_for END,
           app_role = coalesce(update_cluster.app_role, t.app_role),
           replication_role = coalesce(update_cluster.replication_role, t.replication_role),
           updated_at = now()
     WHERE t.name = c.name;
    IF admin_password IS NOT NULL THEN
        INSERT INTO dataenv.cluster_secrets AS s (cluster, admin_password) VALUES (c.name, admin_password)
        ON CONFLICT (cluster) DO UPDATE SET admin_password = EXCLUDED.admin_password, updated_at = now();
    END IF;
    IF app_role IS NOT NULL AND app_role <> c.app_role THEN
        UPDATE dataenv.cluster_secrets SET app_password = NULL, app_password_pending = NULL WHERE cluster = c.name;
    END IF;
    IF replication_role IS NOT NULL AND replication_role <> c.replication_role THEN
        UPDATE dataenv.cluster_secrets SET replication_password = NULL, replication_password_pending = NULL WHERE cluster = c.name;
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.update_cluster(text, text, integer, text, text, text, text, boolean, text, text) IS
    'Changes the given settings of a cluster (NULL keeps a setting). A new host, port, admin_user or managed role names means dataenv.setup_cluster must succeed again before databases are created; new managed role names are refused once databases or datatable roles exist.';

CREATE OR REPLACE FUNCTION dataenv.remove_cluster(name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
    fn constant text := 'dataenv.remove_cluster';
    dbs text;
    roles text;
BEGIN
    c := dataenv.require_cluster(fn, name);
    IF c.kind = 'instance' THEN
        RAISE EXCEPTION '%: the instance cluster cannot be removed', fn USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.lock_cluster_lifecycle(name);
    SELECT string_agg(d.name, ', ' ORDER BY d.name) INTO dbs FROM dataenv.managed_databases d WHERE d.cluster = c.name;
    SELECT string_agg(r.role, ', ' ORDER BY r.role) INTO roles FROM dataenv.datatable_roles r WHERE r.cluster = c.name;
    IF dbs IS NOT NULL OR roles IS NOT NULL THEN
        RAISE EXCEPTION '%: cluster % still has managed databases (%) or datatable roles (%)', fn, to_json(c.name)::text,
            coalesce(dbs, 'none'), coalesce(roles, 'none')
            USING ERRCODE = '55000', HINT = 'Drop them with dataenv.drop_database / dataenv.drop_datatable_role first.';
    END IF;
    DELETE FROM dataenv.clusters t WHERE t.name = c.name;
END
$$;
COMMENT ON FUNCTION dataenv.remove_cluster(text) IS
    'Forgets an external cluster and its secrets; refused while dataenv databases or datatable roles are recorded on it. Managed roles are left on the cluster.';

-- The control database's own cluster. Host and port are what this connection sees (TCP address,
-- or the socket directory); the sidecar reaches it with its own control DSN and no stored password.
INSERT INTO dataenv.clusters (name, kind, host, port, admin_user, sslmode)
VALUES ('instance', 'instance',
        coalesce(host(inet_server_addr()), split_part(current_setting('unix_socket_directories'), ',', 1)),
        coalesce(inet_server_port(), current_setting('port')::integer),
        NULL, 'prefer')
ON CONFLICT (name) DO NOTHING;
INSERT INTO dataenv.cluster_secrets (cluster) VALUES ('instance') ON CONFLICT (cluster) DO NOTHING;

-- ---------------------------------------------------------------------------------------------
-- Uses of a managed database
-- ---------------------------------------------------------------------------------------------

-- Areas that name databases (datatables, forks, lake catalogs, fork lake metadata schemas) plug in
-- by defining, in their own sqlapi file, a function
--     dataenv.managed_database_uses__<area>(cluster text, database text)
--         RETURNS TABLE (kind text, name text, detail text)
-- returning one row per thing that names the database. This function unions all of them, so a
-- drop is refused while any area still uses the database, and no area depends on another's tables
-- existing. A row's (kind, name) is what a cleanup passes to exempt the use it is removing itself.
CREATE OR REPLACE FUNCTION dataenv.managed_database_uses(cluster text, database text)
RETURNS TABLE (kind text, name text, detail text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
BEGIN
    IF cluster IS NULL OR database IS NULL THEN
        RAISE EXCEPTION 'dataenv.managed_database_uses: cluster and database are required' USING ERRCODE = '22004';
    END IF;
    FOR f IN
        SELECT p.proname
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'dataenv'::regnamespace
           AND p.proname LIKE 'managed\_database\_uses\_\_%'
           AND p.pronargs = 2
           AND p.proargtypes[0] = 'text'::regtype AND p.proargtypes[1] = 'text'::regtype
         ORDER BY p.proname
    LOOP
        RETURN QUERY EXECUTE format('SELECT u.kind::text, u.name::text, u.detail::text FROM dataenv.%I($1, $2) AS u', f.proname)
            USING cluster, database;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.managed_database_uses(text, text) IS
    'Everything that names a database of a cluster (datatables, forks, lake catalogs, fork lake schemas), gathered from every dataenv.managed_database_uses__<area>(cluster, database) function. A database is dropped only when this is empty.';

-- ---------------------------------------------------------------------------------------------
-- Request kinds: validators
-- ---------------------------------------------------------------------------------------------

-- Cluster requests change what exists on clusters: only dataenv administrators may make them,
-- whether through the functions below or a plain INSERT INTO dataenv.requests (which dataenv_user
-- may do for other kinds). The sidecar checks requested_by again with the same function.
CREATE OR REPLACE FUNCTION dataenv.is_dataenv_admin(role name) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT FROM pg_catalog.pg_roles r
         WHERE r.rolname = role
           AND (r.rolsuper
                OR pg_catalog.pg_has_role(r.oid, 'dataenv_admin', 'MEMBER')
                OR pg_catalog.pg_has_role(r.oid, (SELECT n.nspowner FROM pg_catalog.pg_namespace n
                                                   WHERE n.nspname = 'dataenv'), 'MEMBER')))
$$;
COMMENT ON FUNCTION dataenv.is_dataenv_admin(name) IS
    'True for superusers, members of dataenv_admin and members of the dataenv schema''s owner: the roles that may make cluster requests.';

-- Internal: raises unless the current user may make cluster requests.
CREATE OR REPLACE FUNCTION dataenv.require_dataenv_admin(kind text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT dataenv.is_dataenv_admin(current_user) THEN
        RAISE EXCEPTION '%: permission denied: cluster requests need membership in dataenv_admin', kind
            USING ERRCODE = '42501';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_dataenv_admin(text) IS 'Internal: raises unless the current user is a dataenv administrator.';

-- Internal: raises on keys outside allowed and on missing or non-string required keys.
CREATE OR REPLACE FUNCTION dataenv.check_request_keys(kind text, args jsonb, required text[], optional text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF NOT (k = ANY (required) OR k = ANY (optional)) THEN
            RAISE EXCEPTION '%: unknown argument "%"', kind, k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    FOREACH k IN ARRAY required LOOP
        IF jsonb_typeof(args->k) IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION '%: argument "%" is required and must be a string', kind, k USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.check_request_keys(text, jsonb, text[], text[]) IS
    'Internal: validates the keys of a request''s args.';

-- Internal: raises unless setup succeeded on the cluster's current host:port.
CREATE OR REPLACE FUNCTION dataenv.check_cluster_ready(fn text, c dataenv.clusters) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF c.set_up_for IS DISTINCT FROM c.host || ':' || c.port THEN
        RAISE EXCEPTION '%: cluster % is not set up for %:% (set up for %)', fn, to_json(c.name)::text, c.host, c.port,
            coalesce(c.set_up_for, 'nothing yet')
            USING ERRCODE = '55000', HINT = format('Run SELECT dataenv.setup_cluster(%L) and wait for it to succeed.', c.name);
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_cluster_ready(text, dataenv.clusters) IS
    'Internal: raises unless the last successful setup of the cluster was for its current host:port.';

CREATE OR REPLACE FUNCTION dataenv.validate_setup_cluster(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.require_dataenv_admin('setup_cluster');
    PERFORM dataenv.check_request_keys('setup_cluster', args, ARRAY['cluster']);
    PERFORM dataenv.require_cluster('setup_cluster', args->>'cluster');
END
$$;
COMMENT ON FUNCTION dataenv.validate_setup_cluster(jsonb) IS 'Validates the args of a setup_cluster request.';

CREATE OR REPLACE FUNCTION dataenv.validate_create_database(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('create_database');
    PERFORM dataenv.check_request_keys('create_database', args, ARRAY['cluster', 'name']);
    c := dataenv.require_cluster('create_database', args->>'cluster');
    PERFORM dataenv.check_name('database', args->>'name');
    PERFORM dataenv.check_cluster_ready('create_database', c);
    IF EXISTS (SELECT FROM dataenv.managed_database_list d WHERE d.cluster = c.name AND d.name = args->>'name') THEN
        RAISE EXCEPTION 'create_database: database % already exists on cluster %', to_json(args->>'name')::text, to_json(c.name)::text
            USING ERRCODE = '42P04';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_create_database(jsonb) IS 'Validates the args of a create_database request.';

CREATE OR REPLACE FUNCTION dataenv.validate_drop_database(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('drop_database');
    PERFORM dataenv.check_request_keys('drop_database', args, ARRAY['cluster', 'name'], ARRAY['terminate_sessions']);
    c := dataenv.require_cluster('drop_database', args->>'cluster');
    PERFORM dataenv.check_name('database', args->>'name');
    IF args ? 'terminate_sessions' AND jsonb_typeof(args->'terminate_sessions') <> 'boolean' THEN
        RAISE EXCEPTION 'drop_database: terminate_sessions must be a boolean' USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM dataenv.managed_database_list d WHERE d.cluster = c.name AND d.name = args->>'name') THEN
        RAISE EXCEPTION 'drop_database: database % on cluster % was not created by dataenv', to_json(args->>'name')::text, to_json(c.name)::text
            USING ERRCODE = '42501', DETAIL = 'dataenv drops only databases recorded in dataenv.managed_database_list.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_drop_database(jsonb) IS 'Validates the args of a drop_database request.';

CREATE OR REPLACE FUNCTION dataenv.validate_create_datatable_role(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('create_datatable_role');
    PERFORM dataenv.check_request_keys('create_datatable_role', args, ARRAY['cluster', 'role'], ARRAY['description']);
    c := dataenv.require_cluster('create_datatable_role', args->>'cluster');
    PERFORM dataenv.check_name('role', args->>'role');
    IF args ? 'description' AND jsonb_typeof(args->'description') NOT IN ('string', 'null') THEN
        RAISE EXCEPTION 'create_datatable_role: description must be a string' USING ERRCODE = '22023';
    END IF;
    IF octet_length(args->>'description') > 1000 THEN
        RAISE EXCEPTION 'create_datatable_role: description is longer than 1000 bytes' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_cluster_ready('create_datatable_role', c);
    IF EXISTS (SELECT FROM dataenv.datatable_role_list r WHERE r.cluster = c.name AND r.role = args->>'role') THEN
        RAISE EXCEPTION 'create_datatable_role: role % already exists on cluster %', to_json(args->>'role')::text, to_json(c.name)::text
            USING ERRCODE = '42710';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_create_datatable_role(jsonb) IS 'Validates the args of a create_datatable_role request.';

CREATE OR REPLACE FUNCTION dataenv.validate_drop_datatable_role(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
BEGIN
    PERFORM dataenv.require_dataenv_admin('drop_datatable_role');
    PERFORM dataenv.check_request_keys('drop_datatable_role', args, ARRAY['cluster', 'role']);
    c := dataenv.require_cluster('drop_datatable_role', args->>'cluster');
    PERFORM dataenv.check_name('role', args->>'role');
    IF NOT EXISTS (SELECT FROM dataenv.datatable_role_list r WHERE r.cluster = c.name AND r.role = args->>'role') THEN
        RAISE EXCEPTION 'drop_datatable_role: role % on cluster % was not created by dataenv', to_json(args->>'role')::text, to_json(c.name)::text
            USING ERRCODE = '42501';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_drop_datatable_role(jsonb) IS 'Validates the args of a drop_datatable_role request.';

INSERT INTO dataenv.request_kinds (kind, validator, description) VALUES
    ('setup_cluster', 'dataenv.validate_setup_cluster(jsonb)'::regprocedure,
     'Converges the managed roles of a cluster and records the host:port it was set up for.'),
    ('create_database', 'dataenv.validate_create_database(jsonb)'::regprocedure,
     'Creates a database owned by the managed application user, with dataenv''s marker and record.'),
    ('drop_database', 'dataenv.validate_drop_database(jsonb)'::regprocedure,
     'Drops a database dataenv created, once nothing uses it.'),
    ('create_datatable_role', 'dataenv.validate_create_datatable_role(jsonb)'::regprocedure,
     'Creates a datatable role on a cluster, with dataenv''s marker.'),
    ('drop_datatable_role', 'dataenv.validate_drop_datatable_role(jsonb)'::regprocedure,
     'Drops a datatable role dataenv created.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, description = EXCLUDED.description;

-- ---------------------------------------------------------------------------------------------
-- Request functions (SECURITY INVOKER: the request is the caller's)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.setup_cluster(cluster text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('setup_cluster', jsonb_build_object('cluster', cluster)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.setup_cluster(text) IS
    'Requests the setup of a cluster: the managed application and replication roles, each with dataenv''s marker (roles without it are refused, never taken over). The result reports each step. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.create_database(cluster text, name text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_database', jsonb_build_object('cluster', cluster, 'name', name)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_database(text, text) IS
    'Requests a new database on a set-up cluster, owned by the managed application user, marked and recorded as dataenv''s. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.drop_database(cluster text, name text, terminate_sessions boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_database', jsonb_build_object('cluster', cluster, 'name', name,
                                                'terminate_sessions', coalesce(terminate_sessions, false))) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_database(text, text, boolean) IS
    'Requests the drop of a database dataenv created (marker and record both needed). Refused while dataenv.managed_database_uses lists anything; refused while sessions are connected unless terminate_sessions, which ends them. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.create_datatable_role(cluster text, role text, description text DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_datatable_role', jsonb_strip_nulls(jsonb_build_object('cluster', cluster, 'role', role,
                                                                          'description', description))) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_datatable_role(text, text, text) IS
    'Requests a datatable role on a set-up cluster: NOLOGIN, granted to the managed application user, with dataenv''s marker. Role names are unique per cluster. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.drop_datatable_role(cluster text, role text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_datatable_role', jsonb_build_object('cluster', cluster, 'role', role)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_datatable_role(text, text) IS
    'Requests the drop of a datatable role dataenv created on a cluster. Returns the request id.';

-- ---------------------------------------------------------------------------------------------
-- Grants: users read clusters and managed objects; administration is dataenv_admin's.
-- ---------------------------------------------------------------------------------------------

REVOKE ALL ON dataenv.clusters, dataenv.cluster_secrets, dataenv.managed_databases, dataenv.datatable_roles FROM PUBLIC;
GRANT SELECT ON dataenv.cluster_info, dataenv.managed_database_list, dataenv.datatable_role_list
    TO dataenv_user, dataenv_admin;

REVOKE EXECUTE ON FUNCTION
    dataenv.register_cluster(text, text, integer, text, text, text, text),
    dataenv.update_cluster(text, text, integer, text, text, text, text, boolean, text, text),
    dataenv.remove_cluster(text),
    dataenv.setup_cluster(text),
    dataenv.create_database(text, text),
    dataenv.drop_database(text, text, boolean),
    dataenv.create_datatable_role(text, text, text),
    dataenv.drop_datatable_role(text, text),
    dataenv.managed_database_uses(text, text),
    dataenv.require_cluster(text, text),
    dataenv.lock_cluster_lifecycle(text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    dataenv.register_cluster(text, text, integer, text, text, text, text),
    dataenv.update_cluster(text, text, integer, text, text, text, text, boolean, text, text),
    dataenv.remove_cluster(text),
    dataenv.setup_cluster(text),
    dataenv.create_database(text, text),
    dataenv.drop_database(text, text, boolean),
    dataenv.create_datatable_role(text, text, text),
    dataenv.drop_datatable_role(text, text),
    dataenv.managed_database_uses(text, text)
  TO dataenv_admin;
GRANT EXECUTE ON FUNCTION dataenv.check_name(text, text) TO dataenv_user, dataenv_admin;
-- The validators run as the inserting user: dataenv_admin reaches the cluster row through
-- require_cluster (SECURITY DEFINER); everyone else is stopped by require_dataenv_admin first.
GRANT EXECUTE ON FUNCTION dataenv.require_cluster(text, text) TO dataenv_admin;
