-- ---------------------------------------------------------------------------------------------
-- Lifecycle: pinned reads (repin_fork) and lake maintenance that keeps what pins need
-- ---------------------------------------------------------------------------------------------

-- A pin is taken by the sidecar (it reads the ancestors' DuckLake catalogs), so both calls are
-- requests. create_fork(..., pin_lakes => true) takes the first pins (sqlapi/shared/006).
CREATE OR REPLACE FUNCTION dataenv.validate_repin_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fork text := args->>'fork';
BEGIN
    PERFORM dataenv.check_request_keys('repin_fork', args, ARRAY['fork']);
    PERFORM dataenv.check_workspace_id('repin_fork', fork);
    PERFORM dataenv.require_workspace_user('repin_fork', fork);
    PERFORM dataenv.require_fork('repin_fork', fork, 'a root reads its own lakes, there is nothing to pin');
END
$$;
COMMENT ON FUNCTION dataenv.validate_repin_fork(jsonb) IS 'Validates the args of a repin_fork request.';

CREATE OR REPLACE FUNCTION dataenv.repin_fork(fork text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('repin_fork', jsonb_build_object('fork', fork)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.repin_fork(text) IS
    'Requests (a member of the fork) that the fork''s deferred lake reads see each ancestor namespace as of now: its current DuckLake snapshot, or the pin of the fork''s parent where the parent is pinned. A fork made without pin_lakes becomes pinned. Its DuckDB script and the forks below it that inherit its pins are prepared again. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.validate_maintain_lake(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ws text := args->>'workspace';
    l record;
BEGIN
    PERFORM dataenv.check_request_keys('maintain_lake', args, ARRAY['workspace', 'lake']);
    PERFORM dataenv.check_workspace_id('maintain_lake', ws);
    PERFORM dataenv.check_lake_name('lake', args->>'lake');
    PERFORM dataenv.require_workspace_owner('maintain_lake', ws, 'maintain its lakes');
    SELECT * INTO l FROM dataenv.lake_info i WHERE i.workspace = ws AND i.name = args->>'lake';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'maintain_lake: workspace % has no lake named %', to_json(ws)::text, to_json(args->>'lake')::text
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.lake_info WHERE workspace = ... lists them.';
    END IF;
    IF l.fork_behavior = 'shared' THEN
        RAISE EXCEPTION 'maintain_lake: lake % of workspace % is shared with its parent: its namespace is the parent''s', to_json(l.name)::text, to_json(ws)::text
            USING ERRCODE = '55000', HINT = 'Maintain it in the workspace whose namespace it is (the nearest ancestor that keeps it isolated, or the root).';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_maintain_lake(jsonb) IS 'Validates the args of a maintain_lake request.';

CREATE OR REPLACE FUNCTION dataenv.maintain_lake(workspace text, lake text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('maintain_lake', jsonb_build_object('workspace', workspace, 'lake', lake)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.maintain_lake(text, text) IS
    'Requests (the workspace''s owner) DuckLake maintenance of the workspace''s own namespace of a lake, as a job in the workspace: every snapshot expired (ducklake_expire_snapshots) but the current one and those a live fork pins, then the files no snapshot left needs deleted (ducklake_cleanup_old_files). The only safe way to maintain a lake that forks read. Returns the request id.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description) VALUES
    ('repin_fork', 'dataenv.validate_repin_fork(jsonb)'::regprocedure, 'workspace_member', 'fork',
     'Moves the pins of a fork''s deferred lake reads to the ancestors'' current snapshots.'),
    ('maintain_lake', 'dataenv.validate_maintain_lake(jsonb)'::regprocedure, 'workspace_owner', 'workspace',
     'Expires the snapshots of a workspace''s lake namespace that neither are current nor pinned by a live fork, and deletes the files they alone needed.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

REVOKE ALL ON FUNCTION dataenv.repin_fork(text), dataenv.maintain_lake(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.repin_fork(text), dataenv.maintain_lake(text, text) TO dataenv_user, dataenv_admin;
