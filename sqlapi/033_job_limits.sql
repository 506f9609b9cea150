-- ---------------------------------------------------------------------------------------------
-- Job limits: per workspace (administrators), inherited by sub-forks, within which a request may
-- ask for a shorter timeout. The installation's defaults are the sidecar's --job-* flags.
-- ---------------------------------------------------------------------------------------------

-- '2GB', '512 MB', '1.5GiB', '1000000' (bytes) → bytes, as DuckDB reads sizes (KB = 1000,
-- KiB = 1024), or a clear error.
CREATE OR REPLACE FUNCTION dataenv.parse_job_bytes(fn text, what text, v text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m text[];
    unit numeric;
BEGIN
    IF v IS NULL THEN
        RETURN NULL;
    END IF;
    m := regexp_match(v, '^\s*([0-9]+(\.[0-9]+)?)\s*([A-Za-z]*)\s*$');
    unit := CASE lower(coalesce(m[3], ''))
        WHEN '' THEN 1 WHEN 'b' THEN 1 WHEN 'bytes' THEN 1
        WHEN 'kb' THEN 1e3 WHEN 'mb' THEN 1e6 WHEN 'gb' THEN 1e9 WHEN 'tb' THEN 1e12
        WHEN 'kib' THEN 1024 WHEN 'mib' THEN 1024^2 WHEN 'gib' THEN 1024^3 WHEN 'tib' THEN 1024^4
    END;
    IF m IS NULL OR unit IS NULL OR m[1]::numeric * unit >= 2^62 THEN
        RAISE EXCEPTION '%: % % is not a size', fn, what, to_json(v)::text
            USING ERRCODE = '22023', HINT = 'Write a number and a unit, as DuckDB does: ''512MB'', ''4GB'', ''1.5GiB''.';
    END IF;
    RETURN floor(m[1]::numeric * unit)::bigint;
END
$$;
COMMENT ON FUNCTION dataenv.parse_job_bytes(text, text, text) IS
    'Internal: a size as DuckDB writes it (''512MB'', ''4GB'', ''1.5GiB'', KB = 1000, KiB = 1024) in bytes, or an error naming fn and what.';

-- Each limit of each workspace: the nearest setting in its fork chain (itself first), and the
-- workspace it comes from; NULL where the installation's default applies.
CREATE OR REPLACE VIEW dataenv.job_limits_effective_all AS
SELECT w.id AS workspace,
       t.timeout, t.ancestor AS timeout_from,
       m.memory_bytes, m.ancestor AS memory_from,
       th.threads, th.ancestor AS threads_from,
       d.disk_bytes, d.ancestor AS disk_from
  FROM dataenv.workspaces w
  LEFT JOIN LATERAL (SELECT l.timeout, c.ancestor FROM dataenv.workspace_chain_all c
                       JOIN dataenv.job_limits l ON l.workspace = c.ancestor
                      WHERE c.workspace = w.id AND l.timeout IS NOT NULL ORDER BY c.depth LIMIT 1) t ON true
  LEFT JOIN LATERAL (SELECT l.memory_bytes, c.ancestor FROM dataenv.workspace_chain_all c
                       JOIN dataenv.job_limits l ON l.workspace = c.ancestor
                      WHERE c.workspace = w.id AND l.memory_bytes IS NOT NULL ORDER BY c.depth LIMIT 1) m ON true
  LEFT JOIN LATERAL (SELECT l.threads, c.ancestor FROM dataenv.workspace_chain_all c
                       JOIN dataenv.job_limits l ON l.workspace = c.ancestor
                      WHERE c.workspace = w.id AND l.threads IS NOT NULL ORDER BY c.depth LIMIT 1) th ON true
  LEFT JOIN LATERAL (SELECT l.disk_bytes, c.ancestor FROM dataenv.workspace_chain_all c
                       JOIN dataenv.job_limits l ON l.workspace = c.ancestor
                      WHERE c.workspace = w.id AND l.disk_bytes IS NOT NULL ORDER BY c.depth LIMIT 1) d ON true;
COMMENT ON VIEW dataenv.job_limits_effective_all IS
    'Internal: each workspace''s job limits, each the nearest setting in its fork chain (and the workspace it is set on); NULL: the installation''s default (the sidecar''s --job-* flags).';

CREATE OR REPLACE VIEW dataenv.job_limit_list WITH (security_barrier) AS
SELECT * FROM dataenv.job_limits_effective_all WHERE dataenv.can_use_workspace(workspace);
COMMENT ON VIEW dataenv.job_limit_list IS
    'The job limits of the workspaces the caller may use: timeout, memory_bytes, threads, disk_bytes, each with the workspace it is set on (a fork inherits its ancestors''); NULL means the installation''s default (the sidecar''s --job-* flags).';

CREATE OR REPLACE FUNCTION dataenv.set_job_limits(workspace text, timeout interval DEFAULT NULL, memory text DEFAULT NULL,
                                                  threads integer DEFAULT NULL, disk text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mem bigint := dataenv.parse_job_bytes('set_job_limits', 'memory', memory);
    dsk bigint := dataenv.parse_job_bytes('set_job_limits', 'disk', disk);
BEGIN
    PERFORM dataenv.require_admin_caller('set_job_limits');
    IF workspace IS NULL OR NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = set_job_limits.workspace) THEN
        RAISE EXCEPTION 'set_job_limits: no workspace named %', coalesce(to_json(workspace)::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF timeout IS NOT NULL AND (timeout <= interval '0' OR timeout > interval '7 days') THEN
        RAISE EXCEPTION 'set_job_limits: timeout % is out of range', timeout
            USING ERRCODE = '22023', HINT = 'Give a positive interval of at most 7 days, such as ''30 minutes''.';
    END IF;
    IF mem IS NOT NULL AND mem < 64000000 THEN
        RAISE EXCEPTION 'set_job_limits: memory % is below 64MB, too little for DuckDB with its extensions', memory USING ERRCODE = '22023';
    END IF;
    IF threads IS NOT NULL AND threads NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'set_job_limits: threads must be between 1 and 1024 (got %)', threads USING ERRCODE = '22023';
    END IF;
    IF dsk IS NOT NULL AND dsk < 16000000 THEN
        RAISE EXCEPTION 'set_job_limits: disk % is below 16MB', disk USING ERRCODE = '22023';
    END IF;
    INSERT INTO dataenv.job_limits AS l (workspace, timeout, memory_bytes, threads, disk_bytes, set_by)
    VALUES (workspace, timeout, mem, threads, dsk, dataenv.acting_role())
    ON CONFLICT ON CONSTRAINT job_limits_pkey DO UPDATE
       SET timeout = coalesce(EXCLUDED.timeout, l.timeout), memory_bytes = coalesce(EXCLUDED.memory_bytes, l.memory_bytes),
           threads = coalesce(EXCLUDED.threads, l.threads), disk_bytes = coalesce(EXCLUDED.disk_bytes, l.disk_bytes),
           set_by = EXCLUDED.set_by, set_at = now();
END
$$;
COMMENT ON FUNCTION dataenv.set_job_limits(text, interval, text, integer, text) IS
    'Sets limits of the DuckDB jobs of a workspace and of its forks (dataenv_admin only): timeout (wall clock, at most 7 days), memory (DuckDB''s memory_limit and the runner''s memory cgroup, e.g. ''4GB''), threads, disk (spill and scratch space plus bytes written into the workspace''s local lake paths, e.g. ''20GB''). NULL leaves a limit as it is; dataenv.reset_job_limits(workspace) returns to inheriting. Forks inherit a limit their own settings do not set. A run or materialize may ask for a shorter timeout (timeout => interval), never a longer one.';

CREATE OR REPLACE FUNCTION dataenv.reset_job_limits(workspace text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.require_admin_caller('reset_job_limits');
    DELETE FROM dataenv.job_limits l WHERE l.workspace = reset_job_limits.workspace;
END
$$;
COMMENT ON FUNCTION dataenv.reset_job_limits(text) IS
    'Removes the job limits set on a workspace (dataenv_admin only): it inherits its ancestors'' again, else the installation''s defaults.';

-- A request's timeout_seconds: a positive number, at most the workspace's timeout when one is
-- set in its chain (the sidecar checks the installation's default too). As the caller: the list
-- shows only the workspaces the caller may use.
CREATE OR REPLACE FUNCTION dataenv.check_job_timeout(fn text, args jsonb) RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_timeout interval;
    from_ws text;
BEGIN
    IF NOT args ? 'timeout_seconds' THEN
        RETURN;
    END IF;
    IF jsonb_typeof(args->'timeout_seconds') <> 'number' OR (args->>'timeout_seconds')::numeric <= 0 THEN
        RAISE EXCEPTION '%: timeout must be a positive interval (timeout_seconds a positive number)', fn USING ERRCODE = '22023';
    END IF;
    SELECT e.timeout, e.timeout_from INTO max_timeout, from_ws
      FROM dataenv.job_limit_list e WHERE e.workspace = args->>'workspace';
    IF max_timeout IS NOT NULL AND (args->>'timeout_seconds')::numeric > extract(epoch FROM max_timeout) THEN
        RAISE EXCEPTION '%: timeout % is longer than the job limit of workspace % (%, set on %)', fn,
              make_interval(secs => (args->>'timeout_seconds')::float8), to_json(args->>'workspace')::text, max_timeout, from_ws
            USING ERRCODE = '22023', HINT = 'Ask for a shorter timeout, or an administrator raises the limit: dataenv.set_job_limits(workspace, timeout => ...).';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_job_timeout(text, jsonb) IS
    'Internal: refuses a job''s timeout_seconds that is not positive or is longer than the workspace''s job timeout.';

REVOKE ALL ON dataenv.job_limits, dataenv.job_limits_effective_all FROM PUBLIC;
REVOKE ALL ON FUNCTION dataenv.set_job_limits(text, interval, text, integer, text), dataenv.reset_job_limits(text),
    dataenv.check_job_timeout(text, jsonb) FROM PUBLIC;
-- dataenv_user may call the administrators' functions so that they can say who may.
GRANT EXECUTE ON FUNCTION dataenv.set_job_limits(text, interval, text, integer, text), dataenv.reset_job_limits(text),
    dataenv.check_job_timeout(text, jsonb) TO dataenv_user, dataenv_admin;
GRANT SELECT ON dataenv.job_limit_list TO dataenv_user, dataenv_admin;
