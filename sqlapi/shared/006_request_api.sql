-- The request API a control installation and a satellite installation have alike, written once
-- and applied first by both installs (sidecar/install: applyAPI): the request table's triggers,
-- ping (and its validator), cancel, wait's argument checks, and the wrappers that file runs,
-- materializations and fork changes. Each install's own files grant them to its roles and add
-- what differs (the control's dataenv.wait waits on the sidecar's gate lock, a satellite's polls:
-- sqlapi/004 and sqlapi/satellite/052). Nothing here needs another file at creation (only
-- dataenv.requests, from the migrations); validate_request and authorize_request are each
-- installation's own, resolved when a row is inserted.

-- ---------------------------------------------------------------------------------------------
-- Request triggers
-- ---------------------------------------------------------------------------------------------

-- BEFORE INSERT: whoever inserts (a function or app code) gets the same validation and
-- authorization. The columns only the sidecar sets keep their defaults because users may insert
-- kind and args alone (and admins requested_by): column privileges, not this trigger, keep them
-- from being forged.
CREATE OR REPLACE FUNCTION dataenv.requests_before_insert() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.kind IS NULL OR NEW.kind = '' THEN
        RAISE EXCEPTION 'dataenv request: kind is required' USING ERRCODE = '22023';
    END IF;
    IF NEW.args IS NULL THEN
        NEW.args := '{}'::jsonb;
    ELSIF jsonb_typeof(NEW.args) <> 'object' THEN
        RAISE EXCEPTION 'dataenv request %: args must be a JSON object, got %', NEW.kind, jsonb_typeof(NEW.args)
            USING ERRCODE = '22023';
    ELSIF octet_length(NEW.args::text) > 65536 THEN
        RAISE EXCEPTION 'dataenv request %: args are % bytes, the limit is 65536', NEW.kind, octet_length(NEW.args::text)
            USING ERRCODE = '54000';
    END IF;
    PERFORM dataenv.validate_request(NEW.kind, NEW.args);
    -- requested_by: the inserting user, or whom an administrator names; the sidecar checks again.
    PERFORM dataenv.authorize_request(NEW.kind, NEW.args, NEW.requested_by);
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.requests_before_insert() IS
    'Validates kind and args of a new request (dataenv.validate_request) and authorizes its requested_by (dataenv.authorize_request), both the installation''s own (a satellite''s under its own roles).';

DROP TRIGGER IF EXISTS requests_before_insert ON dataenv.requests;
CREATE TRIGGER requests_before_insert BEFORE INSERT ON dataenv.requests
    FOR EACH ROW EXECUTE FUNCTION dataenv.requests_before_insert();

-- BEFORE UPDATE of cancel_requested: users may only raise it (column privilege); a pending
-- request is cancelled on the spot, a running one is cancelled by the sidecar when it decodes the
-- update. The sidecar's own updates (claims, steps, outcomes) set updated_at themselves and skip
-- the trigger: it would be a plpgsql call per outcome row.
CREATE OR REPLACE FUNCTION dataenv.requests_before_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF OLD.cancel_requested AND NOT NEW.cancel_requested THEN
        RAISE EXCEPTION 'dataenv request %: a cancellation cannot be withdrawn', OLD.id USING ERRCODE = '22023';
    END IF;
    IF NEW.cancel_requested AND NOT OLD.cancel_requested AND OLD.status = 'pending' THEN
        NEW.status := 'cancelled';
        NEW.error := 'cancelled before it started';
        NEW.finished_at := clock_timestamp();
    END IF;
    NEW.updated_at := clock_timestamp();
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.requests_before_update() IS
    'Keeps cancellations one-way and finishes a pending request that is cancelled (in a satellite, its envelope then finds it finished and runs nothing).';

DROP TRIGGER IF EXISTS requests_before_update ON dataenv.requests;
CREATE TRIGGER requests_before_update BEFORE UPDATE ON dataenv.requests
    FOR EACH ROW WHEN (OLD.cancel_requested IS DISTINCT FROM NEW.cancel_requested)
    EXECUTE FUNCTION dataenv.requests_before_update();

-- AFTER UPDATE: tell LISTENers (application code) that a request finished. Once per statement
-- over its transition tables, not once per row: the sidecar writes outcomes in batches, and a
-- plpgsql call per row was a third of a batch's cost. (A column list, UPDATE OF status, is not
-- allowed together with transition tables; the join keeps only rows whose status became final.)
CREATE OR REPLACE FUNCTION dataenv.requests_notify_finished() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('dataenv_request_finished', n.id::text)
       FROM requests_new n
       JOIN requests_old o ON o.id = n.id
      WHERE n.status IN ('succeeded', 'failed', 'cancelled')
        AND o.status IS DISTINCT FROM n.status;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.requests_notify_finished() IS
    'Sends the request id on channel dataenv_request_finished (in the installation''s own database) for every request an UPDATE brought to a final status.';

DROP TRIGGER IF EXISTS requests_notify_finished ON dataenv.requests;
CREATE TRIGGER requests_notify_finished AFTER UPDATE ON dataenv.requests
    REFERENCING OLD TABLE AS requests_old NEW TABLE AS requests_new
    FOR EACH STATEMENT EXECUTE FUNCTION dataenv.requests_notify_finished();

-- ---------------------------------------------------------------------------------------------
-- ping, cancel, and what both installations' wait check first
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.validate_ping(args jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
BEGIN
    FOR k IN SELECT jsonb_object_keys(args) LOOP
        IF k NOT IN ('sleep_ms') THEN
            RAISE EXCEPTION 'ping: unknown argument "%"', k USING ERRCODE = '22023';
        END IF;
    END LOOP;
    IF args ? 'sleep_ms' AND (jsonb_typeof(args->'sleep_ms') <> 'number'
                              OR (args->>'sleep_ms')::numeric NOT BETWEEN 0 AND 600000) THEN
        RAISE EXCEPTION 'ping: sleep_ms must be a number of milliseconds between 0 and 600000'
            USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_ping(jsonb) IS 'Validates the args of a ping request.';

-- Each installation's dataenv.wait waits its own way (the control's on the sidecar's gate lock, a
-- satellite's by polling); the arguments and the isolation level they need are the same.
CREATE OR REPLACE FUNCTION dataenv.wait_check(request_id uuid, timeout interval) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.wait: request_id is required' USING ERRCODE = '22004';
    END IF;
    IF timeout IS NULL OR timeout < interval '0' THEN
        RAISE EXCEPTION 'dataenv.wait: timeout must be a non-negative interval' USING ERRCODE = '22023';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'dataenv.wait needs READ COMMITTED: under % the outcome can never become visible',
            current_setting('transaction_isolation') USING ERRCODE = '25000';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.wait_check(uuid, interval) IS
    'Internal to dataenv.wait: raises, saying what to pass, unless request_id is given, timeout is a non-negative interval and the transaction is READ COMMITTED.';

-- plpgsql rather than sql: a SQL function that cannot be inlined plans its INSERT on every
-- call, and ping is what health checks and benchmarks call in a loop; plpgsql keeps the plan.
CREATE OR REPLACE FUNCTION dataenv.ping() RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    request_id uuid;
BEGIN
    INSERT INTO dataenv.requests (kind, args) VALUES ('ping', '{}'::jsonb) RETURNING id INTO request_id;
    RETURN request_id;
END
$$;
COMMENT ON FUNCTION dataenv.ping() IS
    'Makes a request that does nothing and returns its id; it runs once the calling transaction commits. SELECT * FROM dataenv.wait(id) returns it finished.';

CREATE OR REPLACE FUNCTION dataenv.cancel(request_id uuid) RETURNS dataenv.requests
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
BEGIN
    IF request_id IS NULL THEN
        RAISE EXCEPTION 'dataenv.cancel: request_id is required' USING ERRCODE = '22004';
    END IF;
    UPDATE dataenv.requests SET cancel_requested = true
     WHERE id = request_id AND status IN ('pending', 'running') AND NOT cancel_requested;
    SELECT * INTO r FROM dataenv.requests WHERE id = request_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'dataenv.cancel: no request % visible to %', request_id, current_user
            USING ERRCODE = 'P0002';
    END IF;
    RETURN r;
END
$$;
COMMENT ON FUNCTION dataenv.cancel(uuid) IS
    'Cancels a request: a pending one is cancelled at once, a running one is stopped by the sidecar (from a satellite, once the cancelling transaction commits: the cancellation reaches its envelope in the control installation then). Returns the row; finished requests are left as they are.';

-- ---------------------------------------------------------------------------------------------
-- Fork changes: create_fork, drop_fork (their validators are the installation's own)
-- ---------------------------------------------------------------------------------------------

-- expires_in and pin_lakes were added after release: the old signatures go first (positional
-- and named calls of the old parameters keep working with the new one).
DROP FUNCTION IF EXISTS dataenv.create_fork(text, text, jsonb, text[]);
DROP FUNCTION IF EXISTS dataenv.create_fork(text, text, jsonb, text[], interval);
DROP FUNCTION IF EXISTS dataenv.create_fork(text, text, jsonb, text[], boolean);
CREATE OR REPLACE FUNCTION dataenv.create_fork(parent text, fork text, datatables jsonb DEFAULT '{}',
                                              shared_lakes text[] DEFAULT '{}', expires_in interval DEFAULT NULL,
                                              pin_lakes boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('create_fork', jsonb_build_object('parent', parent, 'fork', fork,
                                              'datatables', coalesce(datatables, '{}'::jsonb),
                                              'shared_lakes', to_jsonb(coalesce(shared_lakes, '{}'::text[])))
                           || CASE WHEN expires_in IS NULL THEN '{}'::jsonb
                                   ELSE jsonb_build_object('expires_in', expires_in::text) END
                           || jsonb_build_object('pin_lakes', coalesce(pin_lakes, false)))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.create_fork(text, text, jsonb, text[], interval, boolean) IS
    'Requests a fork of workspace parent named fork. datatables maps a datatable name to keep_original (default: the fork uses the parent''s database), schema_only (a new database with the parent''s schema, no rows) or full_copy (schema and rows). Lakes are isolated unless listed in shared_lakes. expires_in: the fork expires that long after it is created (the sidecar drops it then); NULL takes the default of the parent''s expiry policy (dataenv.set_workspace_policy), if any; at most the policy''s maximum. With pin_lakes, the fork''s deferred lake reads see each ancestor as of the snapshot current when the fork was made (dataenv.repin_fork moves the pin). Returns the request id. Made in a satellite installation, the workspaces are the control installation''s, the request runs once the calling transaction commits and its outcome lands in the satellite''s row.';

CREATE OR REPLACE FUNCTION dataenv.drop_fork(fork text, cascade boolean DEFAULT false) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('drop_fork', jsonb_build_object('fork', fork, 'cascade', coalesce(cascade, false)))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.drop_fork(text, boolean) IS
    'Requests the drop of a fork: the workspace, then each database it owns (marker and record required); each registry row is removed only after its drop. Refused while child forks exist unless cascade. Partial failures are reported; run it again to retry. Returns the request id. Made in a satellite installation, the workspaces are the control installation''s, the request runs once the calling transaction commits and its outcome lands in the satellite''s row.';

-- ---------------------------------------------------------------------------------------------
-- Jobs: run, materialize
-- ---------------------------------------------------------------------------------------------

-- A job's timeout travels as timeout_seconds (a number: what an INSERT of one's own writes too).
CREATE OR REPLACE FUNCTION dataenv.job_timeout_arg(timeout interval) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN timeout IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('timeout_seconds', extract(epoch FROM timeout)) END
$$;
COMMENT ON FUNCTION dataenv.job_timeout_arg(interval) IS 'Internal: {"timeout_seconds": n} of a job''s timeout, {} for NULL.';

-- timeout, then max_result_bytes, are new in this signature: the old ones go (install
-- re-applies this file).
DROP FUNCTION IF EXISTS dataenv.run(text, text);
DROP FUNCTION IF EXISTS dataenv.run(text, text, interval);
CREATE OR REPLACE FUNCTION dataenv.run(workspace text, sql text, timeout interval DEFAULT NULL,
                                       max_result_bytes bigint DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('run', jsonb_build_object('workspace', workspace, 'sql', sql) || dataenv.job_timeout_arg(timeout)
                   || CASE WHEN max_result_bytes IS NULL THEN '{}'::jsonb
                           ELSE jsonb_build_object('max_result_bytes', max_result_bytes) END)
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.run(text, text, interval, bigint) IS
    'Requests a DuckDB job for a workspace. In the SQL, ATTACH ''ducklake://<lake>'' AS x and ATTACH ''datatable://<name>'' AS y are resolved for the workspace (in a fork: writes go to the fork''s namespace, reads of tables it has not materialized defer to an ancestor). The result holds the last statement''s columns and rows, cut at 256 KiB of JSON with a truncation marker; max_result_bytes raises that up to 16 MiB (16777216). timeout: a wall-clock limit shorter than the workspace''s job timeout (dataenv.job_limit_list). Returns the request id. Made in a satellite installation, the workspaces are the control installation''s, the request runs once the calling transaction commits and its outcome lands in the satellite''s row.';

-- seed_from_parent is new in this signature: the old one goes (install re-applies this file).
DROP FUNCTION IF EXISTS dataenv.materialize(text, text, text, text);
-- and so is timeout.
DROP FUNCTION IF EXISTS dataenv.materialize(text, text, text, text, boolean);
CREATE OR REPLACE FUNCTION dataenv.materialize(workspace text, target text, query text, strategy text DEFAULT 'replace',
                                              seed_from_parent boolean DEFAULT true, timeout interval DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('materialize', jsonb_build_object('workspace', workspace, 'target', target, 'query', query,
                                              'strategy', coalesce(strategy, 'replace'),
                                              'seed_from_parent', coalesce(seed_from_parent, true))
                             || dataenv.job_timeout_arg(timeout))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.materialize(text, text, text, text, boolean, interval) IS
    'Requests that the rows of query (DuckDB SQL; its last statement is the SELECT, earlier statements may ATTACH) be written to ducklake://<lake>/<table> of the workspace: replace (CREATE OR REPLACE TABLE) or append (created when missing). In a fork, an append onto a table the fork reads from an ancestor starts the fork''s table from the ancestor''s rows (seed_from_parent, default true; false starts it empty). The write goes to the workspace''s namespace; the materialization (status, snapshot, row count) is recorded. timeout: a wall-clock limit shorter than the workspace''s job timeout. Returns the request id. Made in a satellite installation, the workspaces are the control installation''s, the request runs once the calling transaction commits and its outcome lands in the satellite''s row.';
