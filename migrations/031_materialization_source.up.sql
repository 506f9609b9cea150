-- Where a materialization record comes from: 'job' (a materialize request wrote the table) or
-- 'outside' (the table appeared in the workspace's namespace without a dataenv job, written by a
-- member's own DuckDB session, and dataenv recorded it when it next looked at the namespace: a
-- job, prepare_connection, create_fork of a fork below). Outside records have a request_id of
-- their own (random) and no row count.
ALTER TABLE dataenv.materializations
    ADD COLUMN source text NOT NULL DEFAULT 'job' CHECK (source IN ('job', 'outside'));
