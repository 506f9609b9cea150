-- ---------------------------------------------------------------------------------------------
-- Fork expiry: create_fork(..., expires_in), dataenv.set_fork_expiry, dataenv.set_workspace_policy
-- ---------------------------------------------------------------------------------------------
-- A fork's expires_at (dataenv.workspaces) is set when the sidecar creates it (now + expires_in,
-- or the policy's default) and changed by set_fork_expiry. The leader sidecar sweeps
-- (--fork-expiry-interval) and files an ordinary drop_fork request for every expired fork that is
-- not protected and has no child fork left (children go first: a fork whose children have not
-- expired, or never do, waits for them, and for their drops to finish), unless a drop_fork of it
-- is pending or running. Each filed drop is recorded in dataenv.fork_expirations, which shows it
-- to the fork's members.
--
-- Policies: an administrator sets a default and a maximum for the forks created under a workspace
-- (dataenv.set_workspace_policy); a new fork takes the policy of its nearest ancestor that has one
-- (its parent first, then up the chain). Forks that exist keep their expiry when a policy changes.

-- Internal: raises unless v is a JSON string holding a timestamp.
CREATE OR REPLACE FUNCTION dataenv.check_timestamptz_arg(kind text, name text, v jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF jsonb_typeof(v) IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION '%: % must be a timestamp string', kind, name USING ERRCODE = '22023';
    END IF;
    BEGIN
        PERFORM (v #>> '{}')::timestamptz;
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION '%: % must be a timestamp (got %)', kind, name, v::text USING ERRCODE = '22023';
    END;
END
$$;
COMMENT ON FUNCTION dataenv.check_timestamptz_arg(text, text, jsonb) IS
    'Internal: raises (22023) unless v is a JSON string holding a timestamp.';

-- The policy that applies to forks created under a workspace: its own, else its nearest
-- ancestor's. Answered only for a workspace the session may use.
CREATE OR REPLACE FUNCTION dataenv.effective_fork_policy(workspace text,
    OUT policy_from text, OUT default_fork_expiry interval, OUT max_fork_expiry interval)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT p.workspace, p.default_fork_expiry, p.max_fork_expiry
      FROM dataenv.workspace_chain_all c
      JOIN dataenv.workspace_policies p ON p.workspace = c.ancestor
     WHERE c.workspace = effective_fork_policy.workspace
       AND dataenv.workspace_access(effective_fork_policy.workspace, dataenv.acting_role()) IS NOT NULL
     ORDER BY c.depth
     LIMIT 1
$$;
COMMENT ON FUNCTION dataenv.effective_fork_policy(text) IS
    'The expiry policy of forks created under workspace: policy_from is the workspace whose dataenv.set_workspace_policy applies (the workspace itself or its nearest ancestor with one); no row when none does. Answered only for workspaces the caller may use.';

-- Internal: raises unless v (create_fork's expires_in) is a positive interval within the maximum
-- of the policy that applies under parent.
CREATE OR REPLACE FUNCTION dataenv.check_fork_expires_in(kind text, parent text, v jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d interval;
    p record;
BEGIN
    IF jsonb_typeof(v) IS DISTINCT FROM 'string' THEN
        RAISE EXCEPTION '%: expires_in must be an interval string such as ''7 days''', kind USING ERRCODE = '22023';
    END IF;
    BEGIN
        d := (v #>> '{}')::interval;
    EXCEPTION WHEN data_exception THEN
        RAISE EXCEPTION '%: expires_in must be an interval such as ''7 days'' (got %)', kind, v::text USING ERRCODE = '22023';
    END;
    IF d <= interval '0' THEN
        RAISE EXCEPTION '%: expires_in must be positive (got %)', kind, d USING ERRCODE = '22023',
            HINT = 'Leave it NULL for the policy''s default, or no expiry.';
    END IF;
    SELECT * INTO p FROM dataenv.effective_fork_policy(parent);
    IF p.max_fork_expiry IS NOT NULL AND d > p.max_fork_expiry THEN
        RAISE EXCEPTION '%: expires_in % is beyond the maximum expiry of forks under workspace % (%, set on %)',
            kind, d, to_json(parent)::text, p.max_fork_expiry, to_json(p.policy_from)::text
            USING ERRCODE = '22023',
                  HINT = format('Ask for at most %s, or an administrator changes the policy: SELECT dataenv.set_workspace_policy(%L, ...);',
                                p.max_fork_expiry, p.policy_from);
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_fork_expires_in(text, text, jsonb) IS
    'Internal: raises unless v is a positive interval within the maximum fork expiry of the policy that applies under parent.';

-- The expiry of a fork being created under parent (the sidecar, in the transaction that records
-- the fork): now + expires_in, else now + the policy's default; never past now + the policy's
-- maximum (a policy tightened after the request was made still holds).
CREATE OR REPLACE FUNCTION dataenv.fork_expires_at(parent text, expires_in interval) RETURNS timestamptz
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN coalesce(expires_in, p.default_fork_expiry, p.max_fork_expiry) IS NOT NULL
                THEN now() + least(coalesce(expires_in, p.default_fork_expiry, p.max_fork_expiry),
                                   coalesce(p.max_fork_expiry, coalesce(expires_in, p.default_fork_expiry))) END
      FROM (SELECT 1) one LEFT JOIN LATERAL dataenv.effective_fork_policy(parent) p ON true
$$;
COMMENT ON FUNCTION dataenv.fork_expires_at(text, interval) IS
    'Internal (the sidecar''s create_fork): the expiry of a new fork under parent: now + expires_in, else now + the policy''s default (else its maximum), never beyond now + the policy''s maximum; NULL for no expiry.';

CREATE OR REPLACE FUNCTION dataenv.set_fork_expiry(fork text, expires_at timestamptz) RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    fn constant text := 'dataenv.set_fork_expiry';
    caller name := dataenv.acting_role();
    access text;
    w dataenv.workspaces;
    p record;
BEGIN
    PERFORM dataenv.check_workspace_id(fn, fork);
    access := dataenv.workspace_access(fork, caller);
    SELECT * INTO w FROM dataenv.workspaces x WHERE x.id = fork FOR UPDATE;
    IF access IS NULL OR NOT FOUND THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(fork)::text, caller USING ERRCODE = '42501';
    END IF;
    IF access NOT IN ('owner', 'admin') THEN
        RAISE EXCEPTION '%: % is not the owner of fork %', fn, caller, to_json(fork)::text
            USING ERRCODE = '42501', HINT = format('Only its owner (%s) or a dataenv administrator may change its expiry.', w.created_by);
    END IF;
    IF NOT w.is_fork THEN
        RAISE EXCEPTION '%: workspace % is not a fork: only forks expire', fn, to_json(fork)::text USING ERRCODE = '55000';
    END IF;
    SELECT * INTO p FROM dataenv.effective_fork_policy(w.parent);  -- NULLs for an orphaned fork or no policy
    IF p.max_fork_expiry IS NOT NULL THEN
        IF expires_at IS NULL THEN
            RAISE EXCEPTION '%: forks under workspace % must expire within % (the policy set on %): the expiry of % cannot be cleared',
                fn, to_json(w.parent)::text, p.max_fork_expiry, to_json(p.policy_from)::text, to_json(fork)::text
                USING ERRCODE = '22023',
                      HINT = format('Set a time within %s from now, or an administrator changes the policy (dataenv.set_workspace_policy).', p.max_fork_expiry);
        END IF;
        IF expires_at > now() + p.max_fork_expiry THEN
            RAISE EXCEPTION '%: % is beyond the maximum expiry of forks under workspace % (% from now, the policy set on %)',
                fn, expires_at, to_json(w.parent)::text, p.max_fork_expiry, to_json(p.policy_from)::text
                USING ERRCODE = '22023',
                      HINT = format('Set at most now() + %L, or an administrator changes the policy (dataenv.set_workspace_policy).', p.max_fork_expiry);
        END IF;
    END IF;
    UPDATE dataenv.workspaces x SET expires_at = set_fork_expiry.expires_at WHERE x.id = fork;
    RETURN expires_at;
END
$$;
COMMENT ON FUNCTION dataenv.set_fork_expiry(text, timestamptz) IS
    'Sets when a fork expires (its owner or a dataenv administrator): the leader sidecar then files a drop_fork for it, once it has no child fork left and unless it is protected; a time already passed expires it at the next sweep. NULL clears the expiry (refused under a policy with a maximum); a time beyond the maximum of the policy that applies to it is refused. Returns the new expiry.';

CREATE OR REPLACE FUNCTION dataenv.set_workspace_policy(workspace text, default_fork_expiry interval,
                                                        max_fork_expiry interval) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    fn constant text := 'dataenv.set_workspace_policy';
BEGIN
    PERFORM dataenv.require_admin_caller(fn);
    PERFORM dataenv.check_workspace_id(fn, workspace);
    IF NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace) THEN
        RAISE EXCEPTION '%: no workspace %', fn, to_json(workspace)::text USING ERRCODE = 'P0002';
    END IF;
    IF default_fork_expiry <= interval '0' OR max_fork_expiry <= interval '0' THEN
        RAISE EXCEPTION '%: default_fork_expiry and max_fork_expiry must be positive intervals (or NULL)', fn USING ERRCODE = '22023';
    END IF;
    IF default_fork_expiry > max_fork_expiry THEN
        RAISE EXCEPTION '%: default_fork_expiry % is beyond max_fork_expiry %', fn, default_fork_expiry, max_fork_expiry
            USING ERRCODE = '22023';
    END IF;
    IF default_fork_expiry IS NULL AND max_fork_expiry IS NULL THEN
        DELETE FROM dataenv.workspace_policies p WHERE p.workspace = set_workspace_policy.workspace;
        RETURN;
    END IF;
    INSERT INTO dataenv.workspace_policies AS p (workspace, default_fork_expiry, max_fork_expiry, set_by)
    VALUES (workspace, default_fork_expiry, max_fork_expiry, dataenv.acting_role())
    ON CONFLICT ON CONSTRAINT workspace_policies_pkey DO UPDATE
       SET default_fork_expiry = EXCLUDED.default_fork_expiry, max_fork_expiry = EXCLUDED.max_fork_expiry,
           set_by = EXCLUDED.set_by, set_at = now();
END
$$;
COMMENT ON FUNCTION dataenv.set_workspace_policy(text, interval, interval) IS
    'Sets the expiry policy of forks created under a workspace (dataenv administrators): default_fork_expiry applies when create_fork is given no expires_in, max_fork_expiry bounds expires_in and set_fork_expiry (a fork under a maximum always expires). The nearest policy up the chain applies, the workspace''s own first; forks that exist keep their expiry. Both NULL removes the policy.';

-- ---------------------------------------------------------------------------------------------
-- Filing the drops of expired forks (the leader sidecar, every --fork-expiry-interval)
-- ---------------------------------------------------------------------------------------------

-- Children first: what an expired fork waits for before its drop is filed. Its child forks, and
-- its dropped children whose drop_fork is still pending or running (their cleanups unfinished).
-- Answered only for a fork the session may use.
CREATE OR REPLACE FUNCTION dataenv.fork_expiry_waits_for(fork text) RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(s.id ORDER BY s.id), '{}')
      FROM (SELECT c.id FROM dataenv.workspaces c WHERE c.parent = fork_expiry_waits_for.fork
            UNION
            SELECT t.id FROM dataenv.workspace_tombstones t
              JOIN dataenv.requests r ON r.args->>'fork' = t.id
             WHERE t.parent = fork_expiry_waits_for.fork
               AND r.status IN ('pending', 'running') AND r.kind = 'drop_fork') s
     WHERE dataenv.workspace_access(fork_expiry_waits_for.fork, dataenv.acting_role()) IS NOT NULL
$$;
COMMENT ON FUNCTION dataenv.fork_expiry_waits_for(text) IS
    'What an expired fork waits for before the sidecar files its drop (children first): its child forks, and dropped children whose drop_fork has not finished. Answered only for workspaces the caller may use.';

CREATE OR REPLACE FUNCTION dataenv.file_fork_expirations(max_forks integer DEFAULT 100)
RETURNS TABLE (fork text, request_id uuid, expires_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    w record;
    rid uuid;
BEGIN
    -- One sweep at a time (a leader and a predecessor that has not noticed its loss yet).
    PERFORM pg_catalog.pg_advisory_xact_lock(dataenv.lock_class('fork_expiry'), 0);
    -- Ledger rows whose request the retention removed tell nothing any more.
    DELETE FROM dataenv.fork_expirations e WHERE NOT EXISTS (SELECT FROM dataenv.requests r WHERE r.id = e.request_id);
    FOR w IN
        SELECT x.id, x.expires_at FROM dataenv.workspaces x
         WHERE x.expires_at <= now() AND x.is_fork AND NOT x.protected
           AND NOT EXISTS (SELECT FROM dataenv.requests r
                            WHERE r.status IN ('pending', 'running') AND r.kind = 'drop_fork' AND r.args->>'fork' = x.id)
           AND dataenv.fork_expiry_waits_for(x.id) = '{}'
         ORDER BY x.expires_at, x.id
         LIMIT max_forks
           FOR UPDATE OF x SKIP LOCKED
    LOOP
        -- requested_by is the sidecar's role (the role that installed dataenv, an administrator):
        -- the drop passes the kind's policy and is checked again like any other.
        INSERT INTO dataenv.requests (kind, args)
        VALUES ('drop_fork', jsonb_build_object('fork', w.id, 'cascade', false, 'expired_at', w.expires_at))
        RETURNING id INTO rid;
        INSERT INTO dataenv.fork_expirations (request_id, fork, expires_at, members)
        VALUES (rid, w.id, w.expires_at,
                ARRAY(SELECT DISTINCT m FROM (SELECT x.created_by AS m FROM dataenv.workspaces x WHERE x.id = w.id
                                              UNION ALL
                                              SELECT wm.member FROM dataenv.workspace_members wm WHERE wm.workspace = w.id) s
                      ORDER BY m));
        fork := w.id;
        request_id := rid;
        expires_at := w.expires_at;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION dataenv.file_fork_expirations(integer) IS
    'Internal (the leader sidecar): files a drop_fork request (requested_by the sidecar''s role) for each expired, unprotected fork without child forks and without a pending or running drop_fork, at most max_forks, and records it in dataenv.fork_expirations; returns what it filed.';

-- ---------------------------------------------------------------------------------------------
-- What members see: the requests, the ledger, the lifecycle of their workspaces
-- ---------------------------------------------------------------------------------------------

-- Whether the acting role was an owner or member of the fork a recorded expiry drop is for.
CREATE OR REPLACE FUNCTION dataenv.is_fork_expiry_member(request_id uuid) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT FROM dataenv.fork_expirations e
          CROSS JOIN LATERAL unnest(e.members) m(member)
          JOIN pg_catalog.pg_roles r ON r.rolname = m.member
         WHERE e.request_id = is_fork_expiry_member.request_id
           AND pg_catalog.pg_has_role(dataenv.acting_role(), r.oid, 'MEMBER'))
$$;
COMMENT ON FUNCTION dataenv.is_fork_expiry_member(uuid) IS
    'Internal (row-level security of dataenv.requests): true when the acting role is (a member of) the owner or a member the fork had when the sidecar filed this drop for its expiry.';

-- The expiry drops are the sidecar's requests; the fork's members see them too (and wait on them).
DROP POLICY IF EXISTS requests_fork_expiry ON dataenv.requests;
CREATE POLICY requests_fork_expiry ON dataenv.requests FOR SELECT
    USING (kind = 'drop_fork' AND args ? 'expired_at' AND dataenv.is_fork_expiry_member(id));

CREATE OR REPLACE VIEW dataenv.fork_expiration_list WITH (security_barrier) AS
SELECT e.fork, e.expires_at, e.filed_at, e.request_id, r.status, r.error, r.finished_at
  FROM dataenv.fork_expirations e
  LEFT JOIN dataenv.requests r ON r.id = e.request_id
 WHERE dataenv.is_dataenv_admin(current_user) OR dataenv.is_fork_expiry_member(e.request_id);
COMMENT ON VIEW dataenv.fork_expiration_list IS
    'The drop_fork requests the sidecar filed for expired forks, with their status: shown to the fork''s owner and members of the time, and to administrators.';

CREATE OR REPLACE VIEW dataenv.workspace_lifecycle WITH (security_barrier) AS
SELECT w.id AS workspace, w.is_fork, w.parent, w.created_by AS owner,
       w.protected, w.protected_by, w.protected_at,
       w.expires_at, (w.expires_at <= now()) AS expired,
       CASE WHEN w.expires_at <= now() THEN
           CASE WHEN w.protected THEN 'protected'
                WHEN dataenv.fork_expiry_waits_for(w.id) <> '{}' THEN 'waiting for child forks'
                ELSE 'dropping' END END AS expiry_state,
       e.request_id AS expiry_request,
       p.policy_from, p.default_fork_expiry, p.max_fork_expiry
  FROM dataenv.workspaces w
  LEFT JOIN LATERAL (SELECT pol.workspace AS policy_from, pol.default_fork_expiry, pol.max_fork_expiry
                       FROM dataenv.workspace_chain_all c
                       JOIN dataenv.workspace_policies pol ON pol.workspace = c.ancestor
                      WHERE c.workspace = w.id ORDER BY c.depth LIMIT 1) p ON true
  LEFT JOIN LATERAL (SELECT x.request_id FROM dataenv.fork_expirations x
                      WHERE x.fork = w.id ORDER BY x.filed_at DESC LIMIT 1) e ON true
 WHERE dataenv.can_use_workspace(w.id);
COMMENT ON VIEW dataenv.workspace_lifecycle IS
    'Protection and expiry of the workspaces the caller may use: protected (by whom, since when), expires_at, expired and expiry_state (protected, waiting for child forks (dataenv.fork_expiry_waits_for names them), dropping), the last drop_fork the sidecar filed for its expiry, and the expiry policy of forks created under it (policy_from: the workspace whose policy applies).';

REVOKE ALL ON dataenv.workspace_policies, dataenv.fork_expirations FROM PUBLIC;
GRANT SELECT ON dataenv.workspace_policies, dataenv.fork_expirations TO dataenv_admin;
REVOKE ALL ON dataenv.fork_expiration_list, dataenv.workspace_lifecycle FROM PUBLIC;
GRANT SELECT ON dataenv.fork_expiration_list, dataenv.workspace_lifecycle TO dataenv_user, dataenv_admin;
REVOKE ALL ON FUNCTION dataenv.check_timestamptz_arg(text, text, jsonb), dataenv.effective_fork_policy(text),
    dataenv.check_fork_expires_in(text, text, jsonb), dataenv.fork_expires_at(text, interval),
    dataenv.set_fork_expiry(text, timestamptz), dataenv.set_workspace_policy(text, interval, interval),
    dataenv.file_fork_expirations(integer), dataenv.is_fork_expiry_member(uuid), dataenv.fork_expiry_waits_for(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.check_timestamptz_arg(text, text, jsonb), dataenv.effective_fork_policy(text),
    dataenv.check_fork_expires_in(text, text, jsonb),
    dataenv.set_fork_expiry(text, timestamptz), dataenv.set_workspace_policy(text, interval, interval),
    dataenv.is_fork_expiry_member(uuid), dataenv.fork_expiry_waits_for(text) TO dataenv_user, dataenv_admin;
