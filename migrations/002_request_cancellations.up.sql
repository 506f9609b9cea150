-- Cancellations of requests, one row each. The sidecar learns of a cancellation by decoding the
-- insert here, so the request table itself is published for inserts only: outcome updates are
-- then never streamed back to the sidecar.
CREATE TABLE dataenv.request_cancellations (
    request_id   uuid PRIMARY KEY REFERENCES dataenv.requests (id) ON DELETE CASCADE,
    requested_by name NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
