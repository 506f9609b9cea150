-- What the sidecar runs in a satellite for an envelope (sidecar/internal/satellite), once it has
-- attested from the catalogs that this schema and its tables are the installer's. Each is one
-- statement, so the identity check and what follows share one transaction (the tables' locks
-- keep the installation from being dropped and replaced in between) in a single round trip. Only
-- the installer (the sidecar's role) may call them.

-- The envelope's row as the sidecar needs it, or why there is none to run: fenced (another
-- installation), in progress (the origin transaction has not ended), aborted (rolled back),
-- missing (no such row from that transaction). A row still to run is authorized here, under this
-- satellite's policy; denied holds the refusal.
CREATE OR REPLACE FUNCTION dataenv.envelope_load(installation uuid, request_id uuid, origin_xact xid8,
    OUT verdict text, OUT kind text, OUT args jsonb, OUT requested_by name, OUT status text,
    OUT result jsonb, OUT error text, OUT created_at timestamptz, OUT denied text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r dataenv.requests;
    xs text;
    hint text;
BEGIN
    IF installation IS NULL OR request_id IS NULL OR origin_xact IS NULL THEN
        RAISE EXCEPTION 'dataenv.envelope_load: installation, request_id and origin_xact are required' USING ERRCODE = '22004';
    END IF;
    IF (SELECT i.id FROM ONLY dataenv.installation i) IS DISTINCT FROM installation THEN
        verdict := 'fenced';
        RETURN;
    END IF;
    xs := pg_catalog.pg_xact_status(origin_xact);
    IF xs = 'in progress' OR xs = 'aborted' THEN
        verdict := xs;
        RETURN;
    END IF;
    SELECT * INTO r FROM ONLY dataenv.requests q WHERE q.id = request_id AND q.xact = origin_xact;
    IF NOT FOUND THEN
        verdict := 'missing';
        RETURN;
    END IF;
    verdict := 'found';
    kind := r.kind; args := r.args; requested_by := r.requested_by; status := r.status;
    result := r.result; error := r.error; created_at := r.created_at;
    IF r.status IN ('pending', 'running') THEN
        BEGIN
            PERFORM dataenv.authorize_request(r.kind, r.args, r.requested_by);
        EXCEPTION WHEN insufficient_privilege OR invalid_parameter_value THEN
            GET STACKED DIAGNOSTICS denied = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
            IF coalesce(hint, '') <> '' THEN
                denied := denied || ' (' || hint || ')';
            END IF;
        END;
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.envelope_load(uuid, uuid, xid8) IS
    'For the sidecar: the request an envelope names, authorized under this satellite''s policy, or why there is none to run (fenced, in progress, aborted, missing).';

-- Writes an outcome into the envelope's row unless the installation is another one (fenced) or
-- the row moved on (finished, cancelled): written, fenced or moved on.
CREATE OR REPLACE FUNCTION dataenv.envelope_finish(installation uuid, request_id uuid, origin_xact xid8,
    outcome text, outcome_result jsonb, outcome_error text, started timestamptz) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF outcome IS NULL OR outcome NOT IN ('succeeded', 'failed') THEN
        RAISE EXCEPTION 'dataenv.envelope_finish: outcome must be succeeded or failed' USING ERRCODE = '22023';
    END IF;
    IF (SELECT i.id FROM ONLY dataenv.installation i) IS DISTINCT FROM installation THEN
        RETURN 'fenced';
    END IF;
    UPDATE ONLY dataenv.requests q
       SET status = outcome, result = outcome_result, error = outcome_error, attempts = q.attempts + 1,
           started_at = coalesce(q.started_at, started), finished_at = clock_timestamp(), updated_at = clock_timestamp()
     WHERE q.id = request_id AND q.xact = origin_xact AND q.status IN ('pending', 'running');
    IF FOUND THEN
        RETURN 'written';
    END IF;
    RETURN 'moved on';
END
$$;
COMMENT ON FUNCTION dataenv.envelope_finish(uuid, uuid, xid8, text, jsonb, text, timestamptz) IS
    'For the sidecar: writes an envelope''s outcome into this satellite''s row, compare-and-set on its status, after checking the installation is the one that filed it. Returns written, fenced or moved on.';

REVOKE ALL ON FUNCTION dataenv.envelope_load(uuid, uuid, xid8),
    dataenv.envelope_finish(uuid, uuid, xid8, text, jsonb, text, timestamptz) FROM PUBLIC;
