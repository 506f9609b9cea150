-- ---------------------------------------------------------------------------------------------
-- Lifecycle: promote a fork's lake table into its parent
-- ---------------------------------------------------------------------------------------------
-- dataenv.promote(fork, 'ducklake://<lake>/<table>', force) files a request of kind promote. The
-- sidecar writes the fork's version of the table into the parent's namespace as one DuckLake
-- snapshot (new data files under the parent's own data path), records it as a materialization of
-- the parent (strategy replace, promoted_from = the fork), then drops the fork's table and its
-- materialization records so that the fork defers that table to the parent again. The job that
-- writes the parent runs as the parent's workspace role, given read access to the fork's
-- namespace for the job only.
--
-- Who may: the owner of the parent (it rewrites the parent's table; policy workspace_owner on
-- the parent argument) who may also use the fork. Refused for a root workspace, an orphaned fork,
-- a shared lake, a table the fork has not materialized, a protected parent, and (unless force)
-- when the parent's table changed after the fork materialized its version.

-- Internal: the state promote decides from, for a fork's lake table: the fork's latest record
-- (materialized with a snapshot, or not) and the newest record of the parent's table made after
-- it (the parent changed since the fork wrote its version). SECURITY DEFINER (the records of
-- materialization_all); answers only to whoever may use the fork and its parent (session_user,
-- or an administrator: the sidecar).
CREATE OR REPLACE FUNCTION dataenv.promote_state(fork text, parent text, lake text, table_name text,
                                                 OUT fork_materialized boolean, OUT fork_snapshot bigint,
                                                 OUT parent_changed_at timestamptz, OUT parent_changed_by uuid)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f record;
    p record;
BEGIN
    IF dataenv.workspace_access(fork, session_user) IS NULL OR dataenv.workspace_access(parent, session_user) IS NULL THEN
        RAISE EXCEPTION 'promote: % may not use workspace % and its parent', session_user, to_json(fork)::text USING ERRCODE = '42501';
    END IF;
    SELECT m.id, m.status, m.snapshot_id INTO f
      FROM dataenv.materializations m
     WHERE m.workspace = promote_state.fork AND m.lake = promote_state.lake AND m.table_name = promote_state.table_name
     ORDER BY m.id DESC LIMIT 1;
    fork_materialized := FOUND AND f.status = 'materialized' AND f.snapshot_id IS NOT NULL;
    fork_snapshot := CASE WHEN fork_materialized THEN f.snapshot_id END;
    IF fork_materialized THEN
        SELECT m.created_at, m.request_id INTO p
          FROM dataenv.materializations m
         WHERE m.workspace = promote_state.parent AND m.lake = promote_state.lake AND m.table_name = promote_state.table_name
           AND m.id > f.id AND m.status = 'materialized'
         ORDER BY m.id DESC LIMIT 1;
        IF FOUND THEN
            parent_changed_at := p.created_at;
            parent_changed_by := p.request_id;
        END IF;
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.promote_state(text, text, text, text) IS
    'Internal (promote): whether the fork''s latest record of the lake table is a materialization with a snapshot, and the newest materialization of the parent''s table recorded after it (NULL: the parent''s table did not change since). Answers to whoever may use both workspaces.';

-- Internal: raises unless target names a lake that fork has isolated and parent has too.
CREATE OR REPLACE FUNCTION dataenv.check_promote_lake(fork text, parent text, target text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    behavior text;
BEGIN
    t := dataenv.parse_lake_target('promote', target);
    SELECT l.fork_behavior INTO behavior FROM dataenv.lake_info l WHERE l.workspace = fork AND l.name = t.lake;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'promote: workspace % has no lake named %', to_json(fork)::text, to_json(t.lake)::text
            USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.lake_info WHERE workspace = ... lists them.';
    END IF;
    IF behavior <> 'isolated' THEN
        RAISE EXCEPTION 'promote: lake % of fork % is shared with its parent: the fork already writes the parent''s tables, there is nothing to promote',
            to_json(t.lake)::text, to_json(fork)::text USING ERRCODE = '55000';
    END IF;
    IF NOT EXISTS (SELECT FROM dataenv.lake_info l WHERE l.workspace = parent AND l.name = t.lake) THEN
        RAISE EXCEPTION 'promote: the parent % of fork % has no lake named %', to_json(parent)::text, to_json(fork)::text, to_json(t.lake)::text
            USING ERRCODE = '55000';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_promote_lake(text, text, text) IS
    'Internal (promote): raises unless target is ducklake://<lake>/<table> of a lake that the fork keeps isolated and its parent has.';

-- Internal: raises, with what to do, unless fork's table may be promoted into parent now.
CREATE OR REPLACE FUNCTION dataenv.check_promote(fork text, parent text, target text, force boolean) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t record;
    s record;
BEGIN
    PERFORM dataenv.check_promote_lake(fork, parent, target);
    t := dataenv.parse_lake_target('promote', target);
    PERFORM dataenv.refuse_protected('promote', parent, format('have its lake table %s rewritten by a promote', target));
    s := dataenv.promote_state(fork, parent, t.lake, t.table_name);
    IF NOT s.fork_materialized THEN
        RAISE EXCEPTION 'promote: fork % has not materialized % (its latest materialization of it did not succeed, or it reads the parent''s)',
            to_json(fork)::text, target
            USING ERRCODE = '55000',
                  HINT = 'SELECT * FROM dataenv.fork_materialization WHERE workspace = ... shows what the fork materialized; dataenv.materialize writes it.';
    END IF;
    IF s.parent_changed_at IS NOT NULL AND NOT coalesce(force, false) THEN
        RAISE EXCEPTION 'promote: the parent % changed % at % (request %), after fork % materialized its version: promoting would overwrite that change',
            to_json(parent)::text, target, s.parent_changed_at, s.parent_changed_by, to_json(fork)::text
            USING ERRCODE = '55000',
                  HINT = 'Materialize the table in the fork again from the parent''s current rows, or overwrite the parent''s change: dataenv.promote(fork, target, force => true).';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_promote(text, text, text, boolean) IS
    'Internal: raises unless the fork''s lake table may be promoted into parent: an isolated lake both have, a table the fork materialized, an unprotected parent, and (unless force) no change of the parent''s table since the fork materialized it.';

-- SECURITY INVOKER like every validator: the membership checks see the caller.
CREATE OR REPLACE FUNCTION dataenv.validate_promote(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    actual text;
BEGIN
    PERFORM dataenv.check_request_keys('promote', args, ARRAY['fork', 'parent', 'target'], ARRAY['force']);
    IF jsonb_typeof(args->'fork') IS DISTINCT FROM 'string' OR jsonb_typeof(args->'parent') IS DISTINCT FROM 'string'
       OR jsonb_typeof(args->'target') IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION 'promote: fork, parent and target (ducklake://<lake>/<table>) are required strings' USING ERRCODE = '22023';
    END IF;
    IF args ? 'force' AND jsonb_typeof(args->'force') <> 'boolean' THEN
        RAISE EXCEPTION 'promote: force must be true or false' USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_workspace('promote', args->>'fork');
    IF NOT (dataenv.workspace_facts(args->>'fork')).is_fork THEN
        RAISE EXCEPTION 'promote: workspace % is not a fork: a root workspace has no parent to promote into', to_json(args->>'fork')::text
            USING ERRCODE = '55000';
    END IF;
    SELECT w.parent INTO actual FROM dataenv.workspaces w WHERE w.id = args->>'fork';
    IF actual IS NULL THEN
        RAISE EXCEPTION 'promote: fork % has no parent any more (its parent was dropped)', to_json(args->>'fork')::text USING ERRCODE = '55000';
    END IF;
    IF actual <> args->>'parent' THEN
        RAISE EXCEPTION 'promote: the parent of fork % is %, not %', to_json(args->>'fork')::text, to_json(actual)::text,
            to_json(args->>'parent')::text USING ERRCODE = '22023';
    END IF;
    PERFORM dataenv.check_job_workspace('promote', actual);
    PERFORM dataenv.check_promote_lake(args->>'fork', actual, args->>'target');
END
$$;
COMMENT ON FUNCTION dataenv.validate_promote(jsonb) IS
    'Validates the args of a promote request: fork (a fork the caller may use), parent (its parent), target (ducklake://<lake>/<table> of an isolated lake of both), force (boolean). What the tables'' state allows is checked by dataenv.promote when it is called and by the sidecar before it writes (dataenv.check_promote).';

CREATE OR REPLACE FUNCTION dataenv.promote(fork text, target text, force boolean DEFAULT false) RETURNS uuid
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    parent text;
    args jsonb;
    id uuid;
BEGIN
    PERFORM dataenv.check_job_workspace('promote', fork);
    SELECT w.parent INTO parent FROM dataenv.workspaces w WHERE w.id = promote.fork;
    args := jsonb_build_object('fork', fork, 'parent', coalesce(parent, ''), 'target', target, 'force', coalesce(force, false));
    -- The request's own checks, in the order a caller can act on: the arguments, who may, then
    -- what the tables' state allows (checked again by the sidecar before it writes).
    PERFORM dataenv.validate_promote(args);
    PERFORM dataenv.authorize_request('promote', args, current_user);
    PERFORM dataenv.check_promote(fork, parent, target, coalesce(force, false));
    INSERT INTO dataenv.requests (kind, args) VALUES ('promote', args) RETURNING requests.id INTO id;
    RETURN id;
END
$$;
COMMENT ON FUNCTION dataenv.promote(text, text, boolean) IS
    'Requests that the fork''s version of a lake table (ducklake://<lake>/<table>, which the fork materialized in an isolated lake) become its parent''s: one new snapshot in the parent''s namespace, data files written under the parent''s own data path, recorded as a materialization of the parent (strategy replace, promoted_from = the fork); the fork then drops its own table and defers it to the parent again. Only the parent''s owner (or an administrator) may, and only if the parent is not protected. Refused when the parent''s table changed after the fork materialized its version, unless force => true. Returns the request id.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('promote', 'dataenv.validate_promote(jsonb)'::regprocedure, 'workspace_owner', 'parent',
        'Makes a fork''s materialized lake table its parent''s (one snapshot, files in the parent''s data path), then defers it in the fork again.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

REVOKE ALL ON FUNCTION dataenv.promote_state(text, text, text, text), dataenv.check_promote(text, text, text, boolean),
    dataenv.check_promote_lake(text, text, text),
    dataenv.validate_promote(jsonb), dataenv.promote(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.promote_state(text, text, text, text), dataenv.check_promote(text, text, text, boolean),
    dataenv.check_promote_lake(text, text, text),
    dataenv.validate_promote(jsonb), dataenv.promote(text, text, boolean) TO dataenv_user, dataenv_admin;
