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
        IF k NOT IN ('endpoint', 'region', 'access_key_id', 'secret_access_key', 'session_token', 'use_ssl', 'url_style',
                     'read_only_access_key_id', 'read_only_secret_access_key', 'read_only_session_token') THEN
            RAISE EXCEPTION '%: unknown credentials key %', fn, to_json(k)::text
                USING ERRCODE = '22023',
                      HINT = 'Keys: endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style, read_only_access_key_id, read_only_secret_access_key, read_only_session_token.';
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
    IF (credentials ? 'read_only_access_key_id') <> (credentials ? 'read_only_secret_access_key') THEN
        RAISE EXCEPTION '%: credentials need both read_only_access_key_id and read_only_secret_access_key, or neither', fn USING ERRCODE = '22023';
    END IF;
    IF credentials ? 'read_only_access_key_id' AND NOT credentials ? 'access_key_id' THEN
        RAISE EXCEPTION '%: read-only keys need the read-write keys too (access_key_id, secret_access_key)', fn
            USING ERRCODE = '22023', HINT = 'Jobs write their own namespaces with the read-write keys and read everything else with the read-only ones.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_storage_credentials(text, text, jsonb) IS
    'Internal: validates the credentials of an s3:// storage (endpoint, region, access_key_id, secret_access_key, session_token, use_ssl, url_style, and the optional read-only keys read_only_access_key_id, read_only_secret_access_key, read_only_session_token).';

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

-- The workspace exists (whether or not the caller may see it).
CREATE OR REPLACE FUNCTION dataenv.lake_workspace_exists(workspace text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = $1)
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
