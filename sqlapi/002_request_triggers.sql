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
    'Validates kind and args of a new request (dataenv.validate_request) and authorizes its requested_by (dataenv.authorize_request).';

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
    'Keeps cancellations one-way and finishes a pending request that is cancelled.';

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
    'Sends the request id on channel dataenv_request_finished for every request an UPDATE brought to a final status.';

DROP TRIGGER IF EXISTS requests_notify_finished ON dataenv.requests;
CREATE TRIGGER requests_notify_finished AFTER UPDATE ON dataenv.requests
    REFERENCING OLD TABLE AS requests_old NEW TABLE AS requests_new
    FOR EACH STATEMENT EXECUTE FUNCTION dataenv.requests_notify_finished();

-- AFTER UPDATE: a new cancellation is recorded in dataenv.request_cancellations, whose inserts
-- the sidecar decodes (the request table is published for inserts only). Pending requests are
-- recorded too: a stateless request runs without being claimed and must be stopped as well.
CREATE OR REPLACE FUNCTION dataenv.requests_record_cancellation() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO dataenv.request_cancellations (request_id, requested_by)
    VALUES (NEW.id, session_user) ON CONFLICT (request_id) DO NOTHING;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.requests_record_cancellation() IS
    'Records a cancellation for the sidecar to decode when cancel_requested is raised.';

DROP TRIGGER IF EXISTS requests_record_cancellation ON dataenv.requests;
CREATE TRIGGER requests_record_cancellation AFTER UPDATE OF cancel_requested ON dataenv.requests
    FOR EACH ROW WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested)
    EXECUTE FUNCTION dataenv.requests_record_cancellation();

REVOKE ALL ON dataenv.request_cancellations FROM PUBLIC;
GRANT SELECT ON dataenv.request_cancellations TO dataenv_admin;
