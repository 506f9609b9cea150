-- The request retention (sidecar/internal/retention) deletes the oldest finished requests in
-- small batches: this index finds them without reading the whole table.
CREATE INDEX requests_finished_idx ON dataenv.requests (finished_at)
    WHERE status IN ('succeeded', 'failed', 'cancelled');
