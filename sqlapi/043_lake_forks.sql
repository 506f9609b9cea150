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

DROP TRIGGER IF EXISTS workspaces_stamp_fork_lakes ON dataenv.workspaces;
CREATE TRIGGER workspaces_stamp_fork_lakes AFTER INSERT ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_stamp_fork_lakes();

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

-- What the lakes area still holds for a dropped workspace's id (dataenv.workspace_leftovers).
-- 'fork lake data' is a namespace whose metadata schema is gone and whose data files are still to
-- delete: inert, and no obstacle to a new fork of the same id (its cleanup sweeps them).
CREATE OR REPLACE FUNCTION dataenv.workspace_leftovers__lakes(workspace text)
RETURNS TABLE (kind text, detail text, created_by_request uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'lake configuration'::text, 'lake ' || l.name, NULL::uuid
      FROM dataenv.lakes l WHERE l.workspace = workspace_leftovers__lakes.workspace
    UNION ALL
    SELECT CASE WHEN r.schema_dropped THEN 'fork lake data' ELSE 'fork lake namespace' END,
           format('lake %s: schema %s in %s/%s, data %s/%s', r.lake, r.metadata_schema, r.catalog_cluster, r.catalog_database,
                  r.storage_url, r.data_path), NULL::uuid
      FROM dataenv.fork_lake_namespaces r WHERE r.workspace = workspace_leftovers__lakes.workspace
$$;
COMMENT ON FUNCTION dataenv.workspace_leftovers__lakes(text) IS
    'Leftovers of a workspace id in the lakes area: lake configuration rows, fork lake namespaces still to clean (fork lake data: only data files left).';

-- A dropped root takes its lake configuration with it (the catalog and the files are left
-- alone): a workspace created later under the same id must not find the old lakes. A fork's lake
-- rows stay until the lake cleanup of drop_fork has dropped its namespaces.
CREATE OR REPLACE FUNCTION dataenv.workspaces_forget_root_lakes() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM dataenv.lakes l WHERE l.workspace = OLD.id AND l.fork_behavior IS NULL;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_forget_root_lakes() IS
    'AFTER DELETE of a root workspace: removes its lake configuration rows.';
DROP TRIGGER IF EXISTS workspaces_forget_root_lakes ON dataenv.workspaces;
CREATE TRIGGER workspaces_forget_root_lakes AFTER DELETE ON dataenv.workspaces
    FOR EACH ROW WHEN (NOT OLD.is_fork) EXECUTE FUNCTION dataenv.workspaces_forget_root_lakes();

-- Tombstones for lake leftovers of workspaces dropped before tombstones existed.
INSERT INTO dataenv.workspace_tombstones (id, owner, is_fork)
SELECT x.workspace, NULL::name, bool_or(x.is_fork)
  FROM (SELECT l.workspace, l.fork_behavior IS NOT NULL AS is_fork FROM dataenv.lakes l
        UNION ALL
        SELECT r.workspace, true FROM dataenv.fork_lake_namespaces r) x
 WHERE NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = x.workspace)
 GROUP BY x.workspace
ON CONFLICT (id) DO NOTHING;

REVOKE ALL ON FUNCTION
    dataenv.add_storage(text, text, jsonb),
    dataenv.update_storage_credentials(text, jsonb),
    dataenv.add_lake(text, text, text, text, text, text, jsonb),
    dataenv.remove_lake(text, text),
    dataenv.stamp_fork_lakes(text, text, text[]),
    dataenv.lake_workspace_exists(text),
    dataenv.require_lake_workspace(text, text),
    dataenv.managed_database_uses__lakes(text, text),
    dataenv.check_shared_lakes(text, text[]),
    dataenv.fork_lake_leftovers(text),
    dataenv.workspace_leftovers__lakes(text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    dataenv.add_storage(text, text, jsonb),
    dataenv.update_storage_credentials(text, jsonb),
    dataenv.add_lake(text, text, text, text, text, text, jsonb),
    dataenv.remove_lake(text, text)
  TO dataenv_admin;
-- check_shared_lakes, lake_workspace_exists and fork_lake_leftovers answer for any workspace id:
-- internal (validators use dataenv.lake_info, which shows only the caller's workspaces).
GRANT EXECUTE ON FUNCTION dataenv.check_lake_name(text, text) TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.storage_info, dataenv.lake_info, dataenv.fork_lake_namespace_list TO dataenv_user, dataenv_admin;
