-- The request table's triggers that a satellite has too are in sqlapi/shared/006; this one is
-- the control's own (a satellite passes cancellations on to its envelopes instead).

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
