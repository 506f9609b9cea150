-- ---------------------------------------------------------------------------------------------
-- Lifecycle: reset a fork from its parent
-- ---------------------------------------------------------------------------------------------

-- The sidecar renews each schema_only and full_copy copy of the fork from the parent's current
-- state under the copy's own database name (sessions on the old copy are ended first, and the
-- result counts them), and drops what the fork materialized in its isolated lakes, whose reads
-- then defer to the parent again. keep_original datatables are not touched. The checks here are
-- repeated by the sidecar under the fork's lock, where they are authoritative.
CREATE OR REPLACE FUNCTION dataenv.validate_reset_fork(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fork text := args->>'fork';
    f record;
BEGIN
    PERFORM dataenv.check_request_keys('reset_fork', args, ARRAY['fork']);
    PERFORM dataenv.check_workspace_id('reset_fork', fork);
    PERFORM dataenv.require_workspace_user('reset_fork', fork);
    IF NOT dataenv.can_own_workspace(fork) THEN
        RAISE EXCEPTION 'reset_fork: % is not the owner of workspace %', current_user, to_json(fork)::text
            USING ERRCODE = '42501', HINT = 'Only the fork''s owner (who created it) or a dataenv administrator may reset it.';
    END IF;
    PERFORM dataenv.require_fork('reset_fork', fork, 'there is no parent to reset it from');
    f := dataenv.workspace_facts(fork);
    IF cardinality(f.children) > 0 THEN
        RAISE EXCEPTION 'reset_fork: workspace % has child forks (%)', to_json(fork)::text, array_to_string(f.children, ', ')
            USING ERRCODE = '2BP01', HINT = 'Drop them first (dataenv.drop_fork), then reset the fork.';
    END IF;
    PERFORM dataenv.refuse_protected('reset_fork', fork, 'be reset');
END
$$;
COMMENT ON FUNCTION dataenv.validate_reset_fork(jsonb) IS 'Validates the args of a reset_fork request.';

CREATE OR REPLACE FUNCTION dataenv.reset_fork(fork text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('reset_fork', jsonb_build_object('fork', fork)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.reset_fork(text) IS
    'Requests (the fork''s owner, or an administrator) the reset of a fork from its parent''s current state: each schema_only or full_copy copy is made again in its mode under the same database name, so connection strings stay valid (sessions on the old copy are ended; the result''s sessions_ended counts them); the fork''s isolated lake namespaces drop what it materialized and defer to the parent again; keep_original datatables are untouched. Refused for a root workspace and while the fork has child forks. Returns the request id.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description)
VALUES ('reset_fork', 'dataenv.validate_reset_fork(jsonb)'::regprocedure, 'workspace_owner', 'fork',
        'Resets a fork from its parent''s current state: copies renewed under the same names (sessions on them ended), lake namespaces back to deferring.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

REVOKE ALL ON FUNCTION dataenv.validate_reset_fork(jsonb), dataenv.reset_fork(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.validate_reset_fork(jsonb), dataenv.reset_fork(text) TO dataenv_user, dataenv_admin;
