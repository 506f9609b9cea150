-- The publications the sidecar decodes: dataenv_requests (request inserts only: outcome updates
-- are never streamed back) and dataenv (cancellations, and the configuration tables whose changes
-- drop the sidecar's caches). Named tables only, never FOR ALL TABLES: other write traffic in the
-- database is then filtered out at the walsender.
DO $pub$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = 'dataenv_requests') THEN
        CREATE PUBLICATION dataenv_requests FOR TABLE dataenv.requests WITH (publish = 'insert');
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = 'dataenv') THEN
        CREATE PUBLICATION dataenv WITH (publish = 'insert, update');
    END IF;
END
$pub$;

DO $pubtables$
DECLARE
    tables text;
BEGIN
    -- Every table in the dataenv schema that exists from this list is published.
    SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ' ORDER BY c.relname) INTO tables
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'dataenv' AND c.relkind = 'r'
       AND c.relname IN ('request_cancellations', 'clusters', 'workspaces', 'datatables', 'lakes', 'storages');
    EXECUTE format('ALTER PUBLICATION dataenv SET TABLE %s', tables);
END
$pubtables$;
