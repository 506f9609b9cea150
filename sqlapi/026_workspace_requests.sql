-- ---------------------------------------------------------------------------------------------
-- Requests: create_fork, drop_fork
-- ---------------------------------------------------------------------------------------------

-- Validators are SECURITY INVOKER: they run as the role inserting the request and see only the
-- workspaces it may use. The sidecar checks again for the role that made the request.
CREATE OR REPLACE FUNCTION dataenv.validate_create_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k text;
    v jsonb;
    parent text := args->>'parent';
    fork text := args->>'fork';
BEGIN
    PERFORM dataenv.check_request_keys('create_fork', args, ARRAY['parent', 'fork'], ARRAY['datatables', 'shared_lakes', 'expires_in', 'pin_lakes']);
    PERFORM dataenv.check_workspace_id('create_fork', parent);
    PERFORM dataenv.check_workspace_id('create_fork', fork);
    IF NOT dataenv.can_use_workspace(parent) OR NOT (dataenv.workspace_facts(parent)).found THEN
        RAISE EXCEPTION 'create_fork: no workspace % that % may use', to_json(parent)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF (dataenv.workspace_facts(fork)).found THEN
        RAISE EXCEPTION 'create_fork: workspace % already exists', to_json(fork)::text USING ERRCODE = '23505';
    END IF;
    PERFORM dataenv.check_fork_id('create_fork', parent, fork);
    IF args ? 'datatables' THEN
        IF jsonb_typeof(args->'datatables') <> 'object' THEN
            RAISE EXCEPTION 'create_fork: datatables must be a JSON object {"<datatable>": "keep_original" | "schema_only" | "full_copy"}'
                USING ERRCODE = '22023';
        END IF;
        FOR k, v IN SELECT * FROM jsonb_each(args->'datatables') LOOP
            IF jsonb_typeof(v) <> 'string' OR v #>> '{}' NOT IN ('keep_original', 'schema_only', 'full_copy') THEN
                RAISE EXCEPTION 'create_fork: datatable %: mode must be keep_original, schema_only or full_copy (got %)', to_json(k)::text, v::text
                    USING ERRCODE = '22023';
            END IF;
            IF NOT EXISTS (SELECT FROM dataenv.datatable_resolution r WHERE r.workspace = parent AND r.datatable = k) THEN
                RAISE EXCEPTION 'create_fork: workspace % has no datatable %', to_json(parent)::text, to_json(k)::text USING ERRCODE = '22023';
            END IF;
        END LOOP;
    END IF;
    IF args ? 'pin_lakes' AND jsonb_typeof(args->'pin_lakes') <> 'boolean' THEN
        RAISE EXCEPTION 'create_fork: pin_lakes must be true or false' USING ERRCODE = '22023';
    END IF;
    IF args ? 'shared_lakes' THEN
        IF jsonb_typeof(args->'shared_lakes') <> 'array'
           OR EXISTS (SELECT FROM jsonb_array_elements(args->'shared_lakes') e
                       WHERE jsonb_typeof(e) <> 'string' OR e #>> '{}' !~ '^[a-z][a-z0-9_]*$' OR octet_length(e #>> '{}') > 63) THEN
            RAISE EXCEPTION 'create_fork: shared_lakes must be an array of lake names' USING ERRCODE = '22023';
        END IF;
        -- dataenv.lake_info shows the caller only the lakes of workspaces it may use.
        FOR k IN SELECT jsonb_array_elements_text(args->'shared_lakes') LOOP
            IF NOT EXISTS (SELECT FROM dataenv.lake_info l WHERE l.workspace = parent AND l.name = k) THEN
                RAISE EXCEPTION 'dataenv.create_fork: shared_lakes names %, which is not a lake of workspace %', to_json(k)::text, to_json(parent)::text
                    USING ERRCODE = '22023', HINT = 'SELECT name FROM dataenv.lake_info WHERE workspace = ... lists them.';
            END IF;
        END LOOP;
    END IF;
    IF args ? 'expires_in' THEN
        -- the parent's policy (sqlapi/061_fork_expiry.sql): a positive interval within its maximum
        PERFORM dataenv.check_fork_expires_in('create_fork', parent, args->'expires_in');
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_create_fork(jsonb) IS 'Validates the args of a create_fork request.';

CREATE OR REPLACE FUNCTION dataenv.validate_drop_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fork text := args->>'fork';
    f record;
BEGIN
    PERFORM dataenv.check_request_keys('drop_fork', args, ARRAY['fork'], ARRAY['cascade', 'expired_at']);
    PERFORM dataenv.check_workspace_id('drop_fork', fork);
    IF args ? 'cascade' AND jsonb_typeof(args->'cascade') <> 'boolean' THEN
        RAISE EXCEPTION 'drop_fork: cascade must be a boolean' USING ERRCODE = '22023';
    END IF;
    -- expired_at: the expiry the sidecar's sweep found passed (sqlapi/061_fork_expiry.sql); the
    -- drop is refused if the fork's expiry was moved since.
    IF args ? 'expired_at' THEN
        PERFORM dataenv.check_timestamptz_arg('drop_fork', 'expired_at', args->'expired_at');
    END IF;
    f := dataenv.workspace_facts(fork);
    IF NOT f.found THEN
        IF NOT dataenv.workspace_has_leftovers(fork) THEN
            RAISE EXCEPTION 'drop_fork: no workspace %, and nothing of a dropped one that % may clean up is left', to_json(fork)::text, current_user
                USING ERRCODE = 'P0002';
        END IF;
        RETURN; -- finishing the cleanup of a dropped fork (its owner, or an administrator)
    END IF;
    IF NOT dataenv.can_use_workspace(fork) THEN
        RAISE EXCEPTION 'drop_fork: no workspace % that % may use', to_json(fork)::text, current_user USING ERRCODE = '42501';
    END IF;
    IF NOT dataenv.can_own_workspace(fork) THEN
        RAISE EXCEPTION 'drop_fork: % is not the owner of workspace %', current_user, to_json(fork)::text
            USING ERRCODE = '42501', HINT = 'Only the fork''s owner (who created it) or a dataenv administrator may drop it.';
    END IF;
    IF NOT f.is_fork THEN
        RAISE EXCEPTION 'drop_fork: workspace % is not a fork', to_json(fork)::text
            USING ERRCODE = '55000', HINT = 'dataenv.drop_workspace drops a root workspace.';
    END IF;
    IF cardinality(f.children) > 0 AND NOT coalesce((args->>'cascade')::boolean, false) THEN
        RAISE EXCEPTION 'drop_fork: workspace % has child forks (%)', to_json(fork)::text, array_to_string(f.children, ', ')
            USING ERRCODE = '2BP01', HINT = 'Drop them first, or ask for it explicitly: dataenv.drop_fork(fork, cascade => true).';
    END IF;
    PERFORM dataenv.refuse_protected('drop_fork', fork, 'be dropped', coalesce((args->>'cascade')::boolean, false));
END
$$;
COMMENT ON FUNCTION dataenv.validate_drop_fork(jsonb) IS 'Validates the args of a drop_fork request.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description) VALUES
    ('create_fork', 'dataenv.validate_create_fork(jsonb)'::regprocedure, 'workspace_member', 'parent',
     'Creates a fork of a workspace: keep_original datatables share the parent''s database, schema_only and full_copy ones get a database of their own.'),
    ('drop_fork', 'dataenv.validate_drop_fork(jsonb)'::regprocedure, 'workspace_owner', 'fork',
     'Drops a fork and the databases it owns (each guarded; registry rows removed only after their drop); retryable.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

-- dataenv.create_fork and dataenv.drop_fork, which file these kinds, are in sqlapi/shared/006 (a
-- satellite has them alike).
