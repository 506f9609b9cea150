-- ---------------------------------------------------------------------------------------------
-- Registration (dataenv_admin)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.add_storage(name text, url text, credentials jsonb DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.add_storage';
    u text;
BEGIN
    PERFORM dataenv.require_admin_caller(fn);
    PERFORM dataenv.check_lake_name('storage', name);
    u := dataenv.check_storage_url(fn, url);
    PERFORM dataenv.check_storage_credentials(fn, u, credentials);
    IF EXISTS (SELECT FROM dataenv.storages s WHERE s.name = add_storage.name) THEN
        RAISE EXCEPTION '%: storage % already exists', fn, to_json(name)::text USING ERRCODE = '23505';
    END IF;
    INSERT INTO dataenv.storages (name, url) VALUES (name, u);
    INSERT INTO dataenv.storage_secrets (storage, credentials) VALUES (name, coalesce(credentials, '{}'::jsonb));
END
$$;
COMMENT ON FUNCTION dataenv.add_storage(text, text, jsonb) IS
    'Registers a named object-store root: file:///dir or s3://bucket[/prefix]. credentials (s3: endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style; optional read_only_access_key_id, read_only_secret_access_key, read_only_session_token: keys that may only read, which jobs use for everything but the prefixes they write, so a fork cannot overwrite its ancestors'' files) are readable by the sidecar''s role only, never shown in a view, a request or a result.';

CREATE OR REPLACE FUNCTION dataenv.update_storage_credentials(name text, credentials jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.update_storage_credentials';
    u text;
BEGIN
    PERFORM dataenv.require_admin_caller(fn);
    SELECT s.url INTO u FROM dataenv.storages s WHERE s.name = update_storage_credentials.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no storage named %', fn, to_json(name)::text USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_storage_credentials(fn, u, credentials);
    UPDATE dataenv.storage_secrets SET credentials = coalesce(update_storage_credentials.credentials, '{}'::jsonb), updated_at = now()
     WHERE storage = update_storage_credentials.name;
    UPDATE dataenv.storages SET updated_at = now() WHERE storages.name = update_storage_credentials.name;
END
$$;
COMMENT ON FUNCTION dataenv.update_storage_credentials(text, jsonb) IS
    'Replaces the credentials of a storage (for example rotated keys).';

-- validate is new in this signature (and the check request's id the result): the old one goes.
DROP FUNCTION IF EXISTS dataenv.add_lake(text, text, text, text, text, text, jsonb);
CREATE OR REPLACE FUNCTION dataenv.add_lake(workspace text, name text, catalog_cluster text, catalog_database text,
                                           storage text, data_path text, extra_args jsonb DEFAULT '{}',
                                           validate boolean DEFAULT true) RETURNS uuid
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.add_lake';
    p text := trim(both '/' from coalesce(data_path, ''));
    check_id uuid;
BEGIN
    PERFORM dataenv.require_admin_caller(fn);
    PERFORM dataenv.require_lake_workspace(fn, workspace);
    PERFORM dataenv.check_lake_name('lake', name);
    PERFORM dataenv.require_cluster(fn, catalog_cluster);
    IF catalog_database IS NULL OR catalog_database = '' OR octet_length(catalog_database) > 63
       OR catalog_database ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION '%: catalog_database must be a database name of 1 to 63 bytes', fn USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM dataenv.storages s WHERE s.name = add_lake.storage) THEN
        RAISE EXCEPTION '%: no storage named %', fn, coalesce(to_json(storage)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'SELECT name, url FROM dataenv.storage_info lists the storages.';
    END IF;
    IF p = '' OR octet_length(p) > 512 OR p !~ '^[A-Za-z0-9._=-]+(/[A-Za-z0-9._=-]+)*$' OR p ~ '(^|/)\.\.?(/|$)' THEN
        RAISE EXCEPTION '%: data_path % must be a relative path of letters, digits, . _ = - and /, without . or .. segments', fn,
            coalesce(to_json(data_path)::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF p = '__dataenv_forks' OR p LIKE '\_\_dataenv\_forks/%' THEN
        RAISE EXCEPTION '%: data_path must not be under __dataenv_forks/ (reserved for fork data)', fn USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_lake_extra_args(fn, coalesce(extra_args, '{}'::jsonb));
    -- The catalog is a database bound to the workspace: never the control database, a dataenv
    -- installation, a template or a fork copy (add_lake itself is an administrator's).
    PERFORM dataenv.check_binding(fn, catalog_cluster, catalog_database, session_user);
    PERFORM dataenv.lock_cluster_lifecycle(catalog_cluster);
    IF EXISTS (SELECT FROM dataenv.lakes l WHERE l.workspace = add_lake.workspace AND l.name = add_lake.name) THEN
        RAISE EXCEPTION '%: workspace % already has a lake named %', fn, to_json(workspace)::text, to_json(name)::text
            USING ERRCODE = '23505';
    END IF;
    PERFORM dataenv.check_lake_catalog(fn, workspace, name, catalog_cluster, catalog_database, coalesce(extra_args, '{}'::jsonb));
    INSERT INTO dataenv.lakes (workspace, name, catalog_cluster, catalog_database, storage, data_path, extra_args)
    VALUES (workspace, name, catalog_cluster, catalog_database, storage, p, coalesce(extra_args, '{}'::jsonb));
    IF coalesce(validate, true) THEN
        INSERT INTO dataenv.requests (kind, args, requested_by)
        VALUES ('check_lake', jsonb_build_object('workspace', workspace, 'lake', name), dataenv.acting_role())
        RETURNING id INTO check_id;
    END IF;
    RETURN check_id;
END
$$;
COMMENT ON FUNCTION dataenv.add_lake(text, text, text, text, text, text, jsonb, boolean) IS
    'Adds a DuckLake lake to a workspace (dataenv_admin only): its catalog is database catalog_database of a registered cluster, its files live at <storage url>/<data_path>; extra_args are extra ATTACH options ({"OPTION": value}). The catalog database is bound like a datatable: never the control database, a dataenv installation, a template or a fork copy; refused when it is missing (instance cluster) or is another lake''s catalog. Returns the id of a check_lake request (the sidecar connects to the catalog and the storage and says what to fix), or NULL with validate => false. Jobs attach it as ATTACH ''ducklake://<name>''.';

CREATE OR REPLACE FUNCTION dataenv.remove_lake(workspace text, name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l dataenv.lakes;
BEGIN
    PERFORM dataenv.require_admin_caller('dataenv.remove_lake');
    PERFORM dataenv.refuse_protected('dataenv.remove_lake', workspace, format('have its lake %s removed', to_json(name)::text));
    SELECT * INTO l FROM dataenv.lakes x WHERE x.workspace = remove_lake.workspace AND x.name = remove_lake.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv.remove_lake: workspace % has no lake named %', to_json(workspace)::text, to_json(name)::text
            USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.lock_cluster_lifecycle(l.catalog_cluster);
    DELETE FROM dataenv.lakes x WHERE x.workspace = remove_lake.workspace AND x.name = remove_lake.name;
END
$$;
COMMENT ON FUNCTION dataenv.remove_lake(text, text) IS
    'Removes a lake from a workspace''s configuration. Nothing is deleted from the catalog or the storage; fork namespaces stay in the registry until drop_fork cleans them. Refused while the workspace is protected.';
