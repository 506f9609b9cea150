-- ---------------------------------------------------------------------------------------------
-- Checks of a lake's catalog and storage, and changing or removing a storage
-- ---------------------------------------------------------------------------------------------

-- What add_lake can check at call time, from the control database: on the instance cluster the
-- catalog database exists; on any cluster no other lake uses the same catalog database and
-- metadata schema (DuckLake keeps one lake per catalog schema, and refuses a second data path at
-- the first job). Everything that needs a connection (the database on an external cluster, what
-- the catalog already holds, the storage) is the check_lake request's.
CREATE OR REPLACE FUNCTION dataenv.check_lake_catalog(fn text, workspace text, lake text, catalog_cluster text,
                                                     catalog_database text, extra_args jsonb) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    schema text := coalesce(extra_args->>'METADATA_SCHEMA', 'public');
    other record;
BEGIN
    IF EXISTS (SELECT FROM dataenv.clusters c WHERE c.name = catalog_cluster AND c.kind = 'instance')
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_database d WHERE d.datname = catalog_database) THEN
        RAISE EXCEPTION '%: database % does not exist on cluster %', fn, to_json(catalog_database)::text, to_json(catalog_cluster)::text
            USING ERRCODE = '3D000',
                  HINT = format('Create it first: SELECT dataenv.create_database(%L, %L) (wait for it to succeed), then add the lake.',
                                catalog_cluster, catalog_database);
    END IF;
    IF EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace AND w.is_fork) THEN
        RETURN; -- a fork's lake lives in a metadata schema of its own
    END IF;
    SELECT l.workspace, l.name INTO other
      FROM dataenv.lakes l
     WHERE l.catalog_cluster = check_lake_catalog.catalog_cluster AND l.catalog_database = check_lake_catalog.catalog_database
       AND coalesce(l.extra_args->>'METADATA_SCHEMA', 'public') = schema
       AND l.fork_behavior IS NULL
       AND NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = l.workspace AND w.is_fork)
       AND (l.workspace, l.name) IS DISTINCT FROM (check_lake_catalog.workspace, check_lake_catalog.lake)
     ORDER BY l.workspace, l.name LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION '%: database % of cluster % (metadata schema %) is already the catalog of lake % of workspace %',
            fn, to_json(catalog_database)::text, to_json(catalog_cluster)::text, schema, to_json(other.name)::text,
            to_json(other.workspace)::text
            USING ERRCODE = '55000',
                  DETAIL = 'DuckLake keeps one lake per catalog schema: a second lake there would be refused at its first job.',
                  HINT = 'Give the lake a catalog database of its own (dataenv.create_database), or another schema: extra_args => ''{"METADATA_SCHEMA": "..."}''.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_lake_catalog(text, text, text, text, text, jsonb) IS
    'Internal (add_lake): raises unless the catalog database exists (instance cluster) and is not the catalog (same metadata schema) of another lake.';

CREATE OR REPLACE FUNCTION dataenv.validate_check_lake(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.require_dataenv_admin('check_lake');
    PERFORM dataenv.check_request_keys('check_lake', args, ARRAY['workspace', 'lake']);
    IF NOT EXISTS (SELECT FROM dataenv.lake_info l WHERE l.workspace = args->>'workspace' AND l.name = args->>'lake') THEN
        RAISE EXCEPTION 'check_lake: workspace % has no lake named %', to_json(args->>'workspace')::text, to_json(args->>'lake')::text
            USING ERRCODE = '22023', HINT = 'SELECT workspace, name FROM dataenv.lake_info lists the lakes.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_check_lake(jsonb) IS 'Validates the args of a check_lake request.';

CREATE OR REPLACE FUNCTION dataenv.check_lake(workspace text, lake text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('check_lake', jsonb_build_object('workspace', workspace, 'lake', lake)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.check_lake(text, text) IS
    'Requests a check of a lake (dataenv_admin): the sidecar connects to its catalog database (it must exist), checks that a DuckLake catalog already there has this lake''s data path, and that an S3 storage answers. Changes nothing. Returns the request id.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('check_lake', 'dataenv.validate_check_lake(jsonb)'::regprocedure, 'admin', NULL,
        'Connects to a lake''s catalog and storage and reports what the first job will find (or what to fix); changes nothing.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

-- A storage url can change only while nothing was written under it that dataenv knows of: a
-- DuckLake catalog remembers the data path it was first attached with, and fork namespaces
-- registered under the old url are cleaned there.
CREATE OR REPLACE FUNCTION dataenv.update_storage(name text, url text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.update_storage';
    u text;
    written text;
BEGIN
    PERFORM dataenv.require_admin_caller(fn);
    PERFORM 1 FROM dataenv.storages s WHERE s.name = update_storage.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no storage named %', fn, coalesce(to_json(name)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'SELECT name, url FROM dataenv.storage_info lists the storages.';
    END IF;
    u := dataenv.check_storage_url(fn, url);
    PERFORM dataenv.check_storage_credentials(fn, u, (SELECT sec.credentials FROM dataenv.storage_secrets sec WHERE sec.storage = update_storage.name));
    SELECT string_agg(DISTINCT l.workspace || '/' || l.name, ', ') INTO written
      FROM dataenv.lakes l
     WHERE l.storage = update_storage.name
       AND (EXISTS (SELECT FROM dataenv.materializations m WHERE m.workspace = l.workspace AND m.lake = l.name)
            OR EXISTS (SELECT FROM dataenv.fork_lake_namespaces r WHERE r.workspace = l.workspace AND r.lake = l.name));
    IF written IS NULL THEN
        SELECT string_agg(DISTINCT r.workspace || '/' || r.lake, ', ') INTO written
          FROM dataenv.fork_lake_namespaces r WHERE r.storage = update_storage.name;
    END IF;
    IF written IS NOT NULL THEN
        RAISE EXCEPTION '%: lakes on storage % have data under its url already: %', fn, to_json(name)::text, written
            USING ERRCODE = '55000',
                  DETAIL = 'A DuckLake catalog keeps the data path it was first attached with; moving the url would lose the files.',
                  HINT = 'Add a storage with the new url (dataenv.add_storage) and new lakes on it.';
    END IF;
    UPDATE dataenv.storages s SET url = u, updated_at = now() WHERE s.name = update_storage.name;
END
$$;
COMMENT ON FUNCTION dataenv.update_storage(text, text) IS
    'Changes the url of a storage (dataenv_admin), for example to fix a typo; refused once a lake on it has data (a materialization or a fork namespace). Credentials change with dataenv.update_storage_credentials.';

CREATE OR REPLACE FUNCTION dataenv.remove_storage(name text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.remove_storage';
    uses text;
BEGIN
    PERFORM dataenv.require_admin_caller(fn);
    PERFORM 1 FROM dataenv.storages s WHERE s.name = remove_storage.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no storage named %', fn, coalesce(to_json(name)::text, 'NULL')
            USING ERRCODE = '22023', HINT = 'SELECT name, url FROM dataenv.storage_info lists the storages.';
    END IF;
    SELECT string_agg(u, ', ' ORDER BY u) INTO uses FROM (
        SELECT format('lake %s of workspace %s', l.name, l.workspace) AS u FROM dataenv.lakes l WHERE l.storage = remove_storage.name
        UNION ALL
        SELECT format('fork lake namespace %s of %s awaiting cleanup', r.metadata_schema, r.workspace)
          FROM dataenv.fork_lake_namespaces r WHERE r.storage = remove_storage.name) x;
    IF uses IS NOT NULL THEN
        RAISE EXCEPTION '%: storage % is still in use by: %', fn, to_json(name)::text, uses
            USING ERRCODE = '55000',
                  HINT = 'Remove those first: dataenv.remove_lake, dataenv.drop_workspace, dataenv.drop_fork (which also finishes a cleanup).';
    END IF;
    DELETE FROM dataenv.storages s WHERE s.name = remove_storage.name;
END
$$;
COMMENT ON FUNCTION dataenv.remove_storage(text) IS
    'Forgets a storage and its credentials (dataenv_admin); refused while a lake or a fork namespace awaiting cleanup uses it. Nothing is deleted from the storage.';

REVOKE ALL ON FUNCTION dataenv.check_lake_catalog(text, text, text, text, text, jsonb), dataenv.check_lake(text, text),
    dataenv.update_storage(text, text), dataenv.remove_storage(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.check_lake(text, text), dataenv.update_storage(text, text), dataenv.remove_storage(text)
  TO dataenv_user, dataenv_admin;
