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
