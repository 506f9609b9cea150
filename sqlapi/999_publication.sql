-- The publications the sidecar decodes: dataenv_requests (request inserts only: outcome updates
-- are never streamed back) and dataenv (cancellations). Named tables only, never FOR ALL TABLES:
-- other write traffic in the database is then filtered out at the walsender. Configuration
-- tables are not published: nothing in the sidecar caches them across requests (an upgrade
-- removes the ones earlier releases published).
DO $pub$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = 'dataenv_requests') THEN
        CREATE PUBLICATION dataenv_requests FOR TABLE dataenv.requests WITH (publish = 'insert');
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE pubname = 'dataenv') THEN
        CREATE PUBLICATION dataenv WITH (publish = 'insert');
    END IF;
END
$pub$;

ALTER PUBLICATION dataenv SET (publish = 'insert');
ALTER PUBLICATION dataenv SET TABLE dataenv.request_cancellations;
