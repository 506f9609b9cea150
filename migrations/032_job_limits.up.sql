-- Limits of a workspace's DuckDB jobs, set by administrators (dataenv.set_job_limits). A NULL
-- column inherits: the nearest ancestor's setting, else the installation's default (the
-- sidecar's --job-timeout, --job-memory, --job-threads and --job-disk flags).
CREATE TABLE dataenv.job_limits (
    workspace    text PRIMARY KEY REFERENCES dataenv.workspaces (id) ON DELETE CASCADE ON UPDATE CASCADE,
    -- wall-clock time of one job
    timeout      interval CHECK (timeout > interval '0'),
    -- DuckDB's memory_limit, and the runner's memory cgroup where the machine has one
    memory_bytes bigint CHECK (memory_bytes > 0),
    -- DuckDB's threads
    threads      integer CHECK (threads BETWEEN 1 AND 1024),
    -- spill and scratch space plus bytes written into the workspace's local lake paths
    disk_bytes   bigint CHECK (disk_bytes > 0),
    set_by       name NOT NULL,
    set_at       timestamptz NOT NULL DEFAULT now()
);
