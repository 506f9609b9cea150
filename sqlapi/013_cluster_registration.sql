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
           app_role_oid = CASE WHEN coalesce(update_cluster.app_role, t.app_role) <> t.app_role THEN NULL ELSE t.app_role_oid END,
           replication_role_oid = CASE WHEN coalesce(update_cluster.replication_role, t.replication_role) <> t.replication_role
                                       THEN NULL ELSE t.replication_role_oid END,
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
