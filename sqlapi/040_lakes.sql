-- Storages and lakes: registration (storage credentials kept out of every view and request),
-- validation of DuckLake ATTACH options, the stamping of a fork's lakes at fork creation, and the
-- read-only views of the registry of fork lake namespaces.
--
-- Lock: add_lake and remove_lake name a database of a cluster, so they take that cluster's
-- lifecycle lock (dataenv.lock_cluster_lifecycle) like every function that saves such
-- configuration.

-- ---------------------------------------------------------------------------------------------
-- Validation helpers
-- ---------------------------------------------------------------------------------------------

-- Lake and storage names follow the user-chosen name rule of dataenv.check_name (lowercase
-- ASCII letters, digits and underscores, starting with a letter, at most 63 bytes).
CREATE OR REPLACE FUNCTION dataenv.check_lake_name(what text, value text) RETURNS void
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.check_simple_name('dataenv', what, value)
$$;
COMMENT ON FUNCTION dataenv.check_lake_name(text, text) IS
    'Raises unless value is an acceptable lake, storage or lake table name: 1-63 bytes of [a-z0-9_] starting with a letter.';

-- A storage url: file:///absolute/dir or s3://bucket[/prefix]. Returned normalized (no trailing
-- slash).
CREATE OR REPLACE FUNCTION dataenv.check_storage_url(fn text, url text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    u text := rtrim(url, '/');
BEGIN
    IF url IS NULL OR url = '' THEN
        RAISE EXCEPTION '%: url is required (file:///dir or s3://bucket)', fn USING ERRCODE = '22023';
    END IF;
    IF octet_length(url) > 1024 OR url ~ '[[:cntrl:][:space:]''"\\]' THEN
        RAISE EXCEPTION '%: url % has quotes, spaces or control characters, or is longer than 1024 bytes', fn, to_json(left(url, 80))::text
            USING ERRCODE = '22023';
    END IF;
    IF u LIKE 'file:///%' THEN
        IF substr(u, 8) !~ '^(/[A-Za-z0-9._=+-]+)+$' OR substr(u, 8) ~ '/\.\.?(/|$)' THEN
            RAISE EXCEPTION '%: url % must name an absolute directory (letters, digits, . _ = + -) without . or .. segments', fn, to_json(url)::text
                USING ERRCODE = '22023';
        END IF;
        RETURN u;
    END IF;
    IF u ~ '^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9._=-]+)*$' THEN
        RETURN u;
    END IF;
    RAISE EXCEPTION '%: url % is not file:///absolute/dir or s3://bucket[/prefix]', fn, to_json(url)::text
        USING ERRCODE = '22023';
END
$$;
COMMENT ON FUNCTION dataenv.check_storage_url(text, text) IS
    'Internal: validates a storage url (file:///absolute/dir or s3://bucket[/prefix]) and returns it without a trailing slash.';

CREATE OR REPLACE FUNCTION dataenv.check_storage_credentials(fn text, url text, credentials jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    IF credentials IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(credentials) <> 'object' THEN
        RAISE EXCEPTION '%: credentials must be a JSON object', fn USING ERRCODE = '22023';
    END IF;
    IF url LIKE 'file://%' AND credentials <> '{}'::jsonb THEN
        RAISE EXCEPTION '%: a file:// storage takes no credentials', fn USING ERRCODE = '22023';
    END IF;
    FOR k IN SELECT jsonb_object_keys(credentials) LOOP
        IF k NOT IN ('endpoint', 'region', 'access_key_id', 'secret_access_key', 'session_token', 'use_ssl', 'url_style') THEN
            RAISE EXCEPTION '%: unknown credentials key %', fn, to_json(k)::text
                USING ERRCODE = '22023',
                      HINT = 'Keys: endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style.';
        END IF;
        IF k = 'use_ssl' THEN
            IF jsonb_typeof(credentials->k) <> 'boolean' THEN
                RAISE EXCEPTION '%: credentials.use_ssl must be true or false', fn USING ERRCODE = '22023';
            END IF;
        ELSIF jsonb_typeof(credentials->k) <> 'string' OR octet_length(credentials->>k) > 4096
              OR (credentials->>k) ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION '%: credentials.% must be a string of at most 4096 bytes without control characters', fn, k
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF credentials ? 'url_style' AND credentials->>'url_style' NOT IN ('path', 'vhost') THEN
        RAISE EXCEPTION '%: credentials.url_style must be path or vhost', fn USING ERRCODE = '22023';
    END IF;
    IF credentials ? 'endpoint' AND (credentials->>'endpoint') !~ '^(https?://)?[A-Za-z0-9.\[\]:-]+(:[0-9]+)?/?$' THEN
        RAISE EXCEPTION '%: credentials.endpoint must be host[:port] or http(s)://host[:port]', fn USING ERRCODE = '22023';
    END IF;
    IF (credentials ? 'access_key_id') <> (credentials ? 'secret_access_key') THEN
        RAISE EXCEPTION '%: credentials need both access_key_id and secret_access_key, or neither', fn USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_storage_credentials(text, text, jsonb) IS
    'Internal: validates the credentials of an s3:// storage (endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style).';

-- Options dataenv sets itself on every DuckLake ATTACH, or that would move a lake's namespace:
-- refused in extra_args. (METADATA_SCHEMA and META_SCHEMA are allowed for a lake; in an isolated
-- fork they are stripped and replaced by the fork's.)
CREATE OR REPLACE FUNCTION dataenv.check_lake_extra_args(fn text, extra_args jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    t text;
BEGIN
    IF extra_args IS NULL OR jsonb_typeof(extra_args) <> 'object' THEN
        RAISE EXCEPTION '%: extra_args must be a JSON object of ATTACH options, e.g. {"ENCRYPTED": true}', fn
            USING ERRCODE = '22023';
    END IF;
    FOR k IN SELECT jsonb_object_keys(extra_args) LOOP
        IF k !~ '^[A-Z][A-Z0-9_]{0,62}$' THEN
            RAISE EXCEPTION '%: extra_args key % is not an ATTACH option name (upper case letters, digits, _)', fn, to_json(left(k, 80))::text
                USING ERRCODE = '22023';
        END IF;
        IF k IN ('DATA_PATH', 'OVERRIDE_DATA_PATH', 'TYPE', 'READ_ONLY', 'READ_WRITE') THEN
            RAISE EXCEPTION '%: extra_args must not set %: dataenv sets it', fn, k
                USING ERRCODE = '22023',
                      HINT = 'The data path is <storage url>/<data_path>; READ_ONLY is chosen per ATTACH in the job''s SQL.';
        END IF;
        t := jsonb_typeof(extra_args->k);
        IF t NOT IN ('string', 'number', 'boolean') THEN
            RAISE EXCEPTION '%: extra_args.% must be a string, a number or a boolean (got %)', fn, k, t USING ERRCODE = '22023';
        END IF;
        IF t = 'string' AND (octet_length(extra_args->>k) > 1024 OR (extra_args->>k) ~ '[[:cntrl:]]') THEN
            RAISE EXCEPTION '%: extra_args.% must be at most 1024 bytes without control characters', fn, k USING ERRCODE = '22023';
        END IF;
        IF k IN ('METADATA_SCHEMA', 'META_SCHEMA') AND (t <> 'string' OR (extra_args->>k) !~ '^[a-z_][a-z0-9_]{0,62}$'
                                                       OR (extra_args->>k) LIKE 'dataenv\_fork\_%') THEN
            RAISE EXCEPTION '%: extra_args.% must be a schema name of lowercase letters, digits and _ (not dataenv_fork_...)', fn, k
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.check_lake_extra_args(text, jsonb) IS
    'Internal: validates the extra DuckLake ATTACH options of a lake: upper-case option names, scalar values; DATA_PATH, OVERRIDE_DATA_PATH, TYPE, READ_ONLY are refused.';

-- The workspace exists (the workspaces table belongs to another area; checked dynamically so
-- that this file installs on its own).
CREATE OR REPLACE FUNCTION dataenv.lake_workspace_exists(workspace text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found boolean;
BEGIN
    IF pg_catalog.to_regclass('dataenv.workspaces') IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = $1)' INTO found USING workspace;
    RETURN found;
END
$$;
COMMENT ON FUNCTION dataenv.lake_workspace_exists(text) IS 'Internal: whether a workspace exists.';

CREATE OR REPLACE FUNCTION dataenv.require_lake_workspace(fn text, workspace text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF workspace IS NULL OR workspace = '' THEN
        RAISE EXCEPTION '%: workspace is required', fn USING ERRCODE = '22023';
    END IF;
    IF NOT dataenv.lake_workspace_exists(workspace) THEN
        RAISE EXCEPTION '%: no workspace named %', fn, to_json(workspace)::text USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_lake_workspace(text, text) IS
    'Internal: raises, naming the calling function fn, unless workspace is given and exists.';

-- ---------------------------------------------------------------------------------------------
-- Reading storages and lakes (no secrets)
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE VIEW dataenv.storage_info AS
SELECT s.name,
       s.url,
       coalesce(sec.credentials <> '{}'::jsonb, false) AS has_credentials,
       s.created_at,
       s.updated_at
  FROM dataenv.storages s
  LEFT JOIN dataenv.storage_secrets sec ON sec.storage = s.name;
COMMENT ON VIEW dataenv.storage_info IS 'Registered storages without their credentials.';

CREATE OR REPLACE VIEW dataenv.lake_info WITH (security_barrier) AS
SELECT l.workspace, l.name, l.catalog_cluster, l.catalog_database, l.storage,
       s.url || '/' || l.data_path AS data_url, l.data_path, l.extra_args,
       coalesce(l.fork_behavior, 'root') AS fork_behavior, l.created_at, l.updated_at
  FROM dataenv.lakes l
  JOIN dataenv.storages s ON s.name = l.storage
 WHERE dataenv.can_use_workspace(l.workspace);
COMMENT ON VIEW dataenv.lake_info IS
    'Lakes of the workspaces the caller may use: catalog database, where the files live, extra ATTACH options, and for a fork whether the lake is isolated or shared.';

CREATE OR REPLACE VIEW dataenv.fork_lake_namespace_list WITH (security_barrier) AS
SELECT workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url,
       data_path, schema_dropped, registered_at, last_attached_at, last_error
  FROM dataenv.fork_lake_namespaces
 WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.fork_lake_namespace_list IS
    'The registry of fork lake namespaces (the cleanup ledger): one row per physical location a fork attached, deleted only after its metadata schema and data prefix were cleaned up.';

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
    'Registers a named object-store root: file:///dir or s3://bucket[/prefix]. credentials (s3: endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style) are readable by the sidecar''s role only, never shown in a view, a request or a result.';

CREATE OR REPLACE FUNCTION dataenv.update_storage_credentials(name text, credentials jsonb) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.update_storage_credentials';
    u text;
BEGIN
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

CREATE OR REPLACE FUNCTION dataenv.add_lake(workspace text, name text, catalog_cluster text, catalog_database text,
                                           storage text, data_path text, extra_args jsonb DEFAULT '{}') RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.add_lake';
    p text := trim(both '/' from coalesce(data_path, ''));
BEGIN
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
    PERFORM dataenv.lock_cluster_lifecycle(catalog_cluster);
    IF EXISTS (SELECT FROM dataenv.lakes l WHERE l.workspace = add_lake.workspace AND l.name = add_lake.name) THEN
        RAISE EXCEPTION '%: workspace % already has a lake named %', fn, to_json(workspace)::text, to_json(name)::text
            USING ERRCODE = '23505';
    END IF;
    INSERT INTO dataenv.lakes (workspace, name, catalog_cluster, catalog_database, storage, data_path, extra_args)
    VALUES (workspace, name, catalog_cluster, catalog_database, storage, p, coalesce(extra_args, '{}'::jsonb));
END
$$;
COMMENT ON FUNCTION dataenv.add_lake(text, text, text, text, text, text, jsonb) IS
    'Adds a DuckLake lake to a workspace: its catalog is database catalog_database of a registered cluster, its files live at <storage url>/<data_path>; extra_args are extra ATTACH options ({"OPTION": value}). Jobs attach it as ATTACH ''ducklake://<name>''.';

CREATE OR REPLACE FUNCTION dataenv.remove_lake(workspace text, name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l dataenv.lakes;
BEGIN
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
    'Removes a lake from a workspace''s configuration. Nothing is deleted from the catalog or the storage; fork namespaces stay in the registry until drop_fork cleans them.';

-- ---------------------------------------------------------------------------------------------
-- Fork creation (called by the workspaces area)
-- ---------------------------------------------------------------------------------------------

-- Raises unless every name of shared_lakes is a lake of parent.
CREATE OR REPLACE FUNCTION dataenv.check_shared_lakes(parent text, shared_lakes text[]) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n text;
BEGIN
    FOREACH n IN ARRAY coalesce(shared_lakes, '{}'::text[]) LOOP
        IF NOT EXISTS (SELECT FROM dataenv.lakes l WHERE l.workspace = parent AND l.name = n) THEN
            RAISE EXCEPTION 'dataenv.create_fork: shared_lakes names %, which is not a lake of workspace %',
                coalesce(to_json(n)::text, 'NULL'), to_json(parent)::text
                USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.lake_info WHERE workspace = ... lists them.';
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.check_shared_lakes(text, text[]) IS
    'Raises unless every name in shared_lakes is a lake of workspace parent (create_fork''s validation).';

-- Copies parent's lakes to fork, stamped isolated unless listed in shared_lakes. The parent's own
-- stamp is never copied: a fork of a shared fork is isolated again. Idempotent.
CREATE OR REPLACE FUNCTION dataenv.stamp_fork_lakes(parent text, fork text, shared_lakes text[] DEFAULT '{}') RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    IF parent IS NULL OR fork IS NULL OR parent = fork THEN
        RAISE EXCEPTION 'dataenv.stamp_fork_lakes: parent and fork are required and must differ' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_shared_lakes(parent, shared_lakes);
    INSERT INTO dataenv.lakes (workspace, name, catalog_cluster, catalog_database, storage, data_path, extra_args, fork_behavior)
    SELECT fork, l.name, l.catalog_cluster, l.catalog_database, l.storage, l.data_path, l.extra_args,
           CASE WHEN l.name = ANY (coalesce(shared_lakes, '{}'::text[])) THEN 'shared' ELSE 'isolated' END
      FROM dataenv.lakes l
     WHERE l.workspace = parent
    ON CONFLICT (workspace, name) DO UPDATE
       SET catalog_cluster = EXCLUDED.catalog_cluster, catalog_database = EXCLUDED.catalog_database,
           storage = EXCLUDED.storage, data_path = EXCLUDED.data_path, extra_args = EXCLUDED.extra_args,
           fork_behavior = EXCLUDED.fork_behavior, updated_at = now();
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
COMMENT ON FUNCTION dataenv.stamp_fork_lakes(text, text, text[]) IS
    'Internal (create_fork): gives fork its own copy of parent''s lakes, each stamped isolated, or shared when listed in shared_lakes. Sharing is never inherited.';

-- What the lake registry still holds for a workspace id (drop_fork and create_fork count these
-- as leftovers of a fork, like fork copies).
CREATE OR REPLACE FUNCTION dataenv.fork_lake_leftovers(workspace text) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*)::integer FROM dataenv.fork_lake_namespaces r WHERE r.workspace = fork_lake_leftovers.workspace
$$;
COMMENT ON FUNCTION dataenv.fork_lake_leftovers(text) IS
    'How many fork lake namespaces of a workspace id are still in the registry awaiting cleanup.';

-- The stamp runs from a trigger on the workspaces table, so that a fork gets its lakes in the
-- transaction that creates it however the row is inserted.
CREATE OR REPLACE FUNCTION dataenv.workspaces_stamp_fork_lakes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.is_fork AND NEW.parent IS NOT NULL THEN
        PERFORM dataenv.stamp_fork_lakes(NEW.parent, NEW.id, NEW.shared_lakes);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_stamp_fork_lakes() IS
    'AFTER INSERT on dataenv.workspaces: a new fork gets its own lake entries, isolated unless listed in its shared_lakes.';

DO $trg$
BEGIN
    IF pg_catalog.to_regclass('dataenv.workspaces') IS NOT NULL THEN
        DROP TRIGGER IF EXISTS workspaces_stamp_fork_lakes ON dataenv.workspaces;
        CREATE TRIGGER workspaces_stamp_fork_lakes AFTER INSERT ON dataenv.workspaces
            FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_stamp_fork_lakes();
    END IF;
END
$trg$;

-- A lake catalog names its database: drop_database is refused while a lake uses it.
CREATE OR REPLACE FUNCTION dataenv.managed_database_uses__lakes(cluster text, database text)
RETURNS TABLE (kind text, name text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'lake'::text, l.workspace || '/' || l.name, 'catalog of lake ' || l.name || ' of workspace ' || l.workspace
      FROM dataenv.lakes l
     WHERE l.catalog_cluster = managed_database_uses__lakes.cluster AND l.catalog_database = managed_database_uses__lakes.database
    UNION ALL
    SELECT 'fork lake namespace'::text, r.workspace || '/' || r.lake,
           'metadata schema ' || r.metadata_schema || ' awaiting cleanup'
      FROM dataenv.fork_lake_namespaces r
     WHERE r.catalog_cluster = managed_database_uses__lakes.cluster AND r.catalog_database = managed_database_uses__lakes.database
       AND NOT r.schema_dropped
$$;
COMMENT ON FUNCTION dataenv.managed_database_uses__lakes(text, text) IS
    'Lakes whose catalog is the database, and fork lake namespaces in it not yet cleaned up.';

REVOKE ALL ON FUNCTION
    dataenv.add_storage(text, text, jsonb),
    dataenv.update_storage_credentials(text, jsonb),
    dataenv.add_lake(text, text, text, text, text, text, jsonb),
    dataenv.remove_lake(text, text),
    dataenv.stamp_fork_lakes(text, text, text[]),
    dataenv.lake_workspace_exists(text),
    dataenv.require_lake_workspace(text, text),
    dataenv.managed_database_uses__lakes(text, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    dataenv.add_storage(text, text, jsonb),
    dataenv.update_storage_credentials(text, jsonb),
    dataenv.add_lake(text, text, text, text, text, text, jsonb),
    dataenv.remove_lake(text, text)
  TO dataenv_admin;
GRANT EXECUTE ON FUNCTION dataenv.check_shared_lakes(text, text[]), dataenv.check_lake_name(text, text),
    dataenv.lake_workspace_exists(text), dataenv.require_lake_workspace(text, text)
  TO dataenv_user, dataenv_admin;
GRANT EXECUTE ON FUNCTION dataenv.fork_lake_leftovers(text) TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.storage_info, dataenv.lake_info, dataenv.fork_lake_namespace_list TO dataenv_user, dataenv_admin;
