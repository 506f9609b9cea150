-- What materialize jobs wrote: one row per run. The latest row per (workspace, lake, table) is
-- the table's state that read-defer decisions are made from.
CREATE TABLE dataenv.materializations (
    id              bigserial PRIMARY KEY,
    workspace       text NOT NULL,
    lake            text NOT NULL,
    table_name      text NOT NULL,
    status          text NOT NULL CHECK (status IN ('materialized', 'failed')),
    strategy        text NOT NULL CHECK (strategy IN ('replace', 'append')),
    -- the DuckLake snapshot the write committed (NULL when it failed before committing)
    snapshot_id     bigint,
    row_count       bigint,
    -- the columns of the table after the write: [{"name": ..., "type": ...}]
    columns         jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- the metadata schema the table was written to (the fork's for an isolated fork)
    metadata_schema text,
    request_id      uuid NOT NULL,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX materializations_latest_idx ON dataenv.materializations (workspace, lake, table_name, id DESC);
CREATE UNIQUE INDEX materializations_request_idx ON dataenv.materializations (request_id);
