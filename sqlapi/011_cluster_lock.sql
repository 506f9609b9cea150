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
