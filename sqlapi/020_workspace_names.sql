-- Workspaces, membership, datatables, fork chains and the fork requests.
--
-- Who may use a workspace: its members (dataenv.workspace_members; a role is a member when it is,
-- or is a member of, a member role) and dataenv_admin. Row-level security enforces it on every
-- table here, the user-facing functions are SECURITY INVOKER so that it applies to the caller,
-- and the sidecar checks it again for the role that made a request. Views that walk a fork chain
-- (the parent may be a workspace the caller is not a member of) are owned by the installing role
-- and filter on the caller's membership of the workspace they start from.
--
-- Lock: a datatable row is saved under the lifecycle lock of its cluster (a trigger takes
-- dataenv.lock_cluster_lifecycle), so a database is never dropped while a new entry starts
-- naming it.


-- ---------------------------------------------------------------------------------------------
-- Names and membership
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.check_workspace_id(fn text, id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF id IS NULL OR id = '' THEN
        RAISE EXCEPTION '%: workspace id is required', fn USING ERRCODE = '22023';
    END IF;
    IF octet_length(id) > 63 THEN
        RAISE EXCEPTION '%: workspace id % is % bytes; the limit is 63', fn, to_json(left(id, 80))::text, octet_length(id)
            USING ERRCODE = '22023';
    END IF;
    IF id !~ '^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*$' THEN
        RAISE EXCEPTION '%: workspace id % is not allowed', fn, to_json(id)::text
            USING ERRCODE = '22023',
                  DETAIL = 'Workspace ids are lowercase ASCII letters, digits, "_", "-" and ".", in segments separated by "/", each starting with a letter or digit.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_workspace_id(text, text) IS
    'Raises unless id is an acceptable workspace id: at most 63 bytes of [a-z0-9_.-] segments separated by "/", each starting with a letter or digit.';

-- The refusal of a request that only a fork can take (compare, reset, repin): one text and hint,
-- why says what a root lacks.
CREATE OR REPLACE FUNCTION dataenv.require_fork(fn text, fork text, why text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT (dataenv.workspace_facts(fork)).is_fork THEN
        RAISE EXCEPTION '%: workspace % is not a fork: %', fn, to_json(fork)::text, why
            USING ERRCODE = '55000', HINT = 'SELECT id, parent FROM dataenv.workspaces WHERE is_fork lists the forks you may use.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_fork(text, text, text) IS
    'Internal: raises 55000 (why says what a root workspace lacks) unless fork is a fork.';

-- The rule for names users choose (datatables here, lakes, storages and lake tables in
-- 040_lake_checks.sql): one function, so the rule and its message are the same everywhere.
CREATE OR REPLACE FUNCTION dataenv.check_simple_name(fn text, what text, value text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL OR value = '' THEN
        RAISE EXCEPTION '%: % name is required', fn, what USING ERRCODE = '22023';
    END IF;
    IF octet_length(value) > 63 OR value !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION '%: % name % is not allowed', fn, what, to_json(left(value, 80))::text
            USING ERRCODE = '22023',
                  DETAIL = 'Names are 1 to 63 lowercase ASCII letters, digits and underscores, starting with a letter.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_simple_name(text, text, text) IS
    'Raises unless value is an acceptable user-chosen name: 1-63 bytes of [a-z0-9_] starting with a letter.';

CREATE OR REPLACE FUNCTION dataenv.check_datatable_name(fn text, name text) RETURNS void
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.check_simple_name(fn, 'datatable', name)
$$;
COMMENT ON FUNCTION dataenv.check_datatable_name(text, text) IS
    'Raises unless name is an acceptable datatable name: 1-63 bytes of [a-z0-9_] starting with a letter.';

-- Whether role has rights on a workspace, and which: 'admin' (a dataenv administrator: every
-- workspace, existing or not), 'owner' (the workspace's owner, its creator created_by, or a
-- member of that role; for a dropped workspace whose cleanup is not finished, the owner its
-- tombstone records), 'member' (a member role of the workspace, or a member of one), or NULL.
-- SECURITY DEFINER so that policies on workspace_members itself can use it without recursing;
-- it answers only for the session's own roles or to an administrator (dataenv.may_ask_about),
-- and NULL otherwise, so it cannot be used to learn other tenants' workspaces.
CREATE OR REPLACE FUNCTION dataenv.workspace_access(workspace text, role name) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r oid;
    owner name;
BEGIN
    SELECT u.oid INTO r FROM pg_catalog.pg_roles u WHERE u.rolname = role;
    IF r IS NULL OR workspace IS NULL OR NOT dataenv.may_ask_about(role) THEN
        RETURN NULL;
    END IF;
    IF dataenv.is_dataenv_admin(role) THEN
        RETURN 'admin';
    END IF;
    SELECT w.created_by INTO owner FROM dataenv.workspaces w WHERE w.id = workspace;
    IF NOT FOUND THEN
        SELECT t.owner INTO owner FROM dataenv.workspace_tombstones t WHERE t.id = workspace;
        IF owner IS NOT NULL AND EXISTS (SELECT FROM pg_catalog.pg_roles o WHERE o.rolname = owner
                                                AND pg_catalog.pg_has_role(r, o.oid, 'MEMBER')) THEN
            RETURN 'owner';
        END IF;
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_roles o WHERE o.rolname = owner AND pg_catalog.pg_has_role(r, o.oid, 'MEMBER')) THEN
        RETURN 'owner';
    END IF;
    IF EXISTS (SELECT FROM dataenv.workspace_members m
                 JOIN pg_catalog.pg_roles mr ON mr.rolname = m.member
                WHERE m.workspace = workspace_access.workspace
                  AND pg_catalog.pg_has_role(r, mr.oid, 'MEMBER')) THEN
        RETURN 'member';
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspace_access(text, name) IS
    'The rights role has on a workspace: admin, owner (its creator, or the owner a dropped workspace''s tombstone records), member, or NULL. Answers only for the session''s own roles or to a dataenv administrator (NULL otherwise).';

-- Whether role is (or is a member of) one of the workspace's member roles, its owner, or an
-- administrator; answered only as dataenv.workspace_access answers.
CREATE OR REPLACE FUNCTION dataenv.is_workspace_member(workspace text, role name) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN dataenv.workspace_access(workspace, role) IS NOT NULL;
END
$$;
COMMENT ON FUNCTION dataenv.is_workspace_member(text, name) IS
    'True when role may use the workspace (a member role or a member of one, its owner, or an administrator). False for roles that are not the session''s own, unless the session is an administrator''s.';

-- The caller may use the workspace: a member, its owner, or a dataenv administrator. (plpgsql,
-- as the other helpers of every request insert: sqlapi/001; it is never inlined into policies.)
CREATE OR REPLACE FUNCTION dataenv.can_use_workspace(workspace text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN dataenv.workspace_access(can_use_workspace.workspace, current_user) IS NOT NULL;
END
$$;
COMMENT ON FUNCTION dataenv.can_use_workspace(text) IS
    'True when the current role may use the workspace: it is a member (directly or through a member role), its owner, or a dataenv administrator.';

-- The caller may administer the workspace (drop it, grant and revoke members): its owner or a
-- dataenv administrator.
CREATE OR REPLACE FUNCTION dataenv.can_own_workspace(workspace text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN dataenv.workspace_access(can_own_workspace.workspace, current_user) IN ('owner', 'admin');
END
$$;
COMMENT ON FUNCTION dataenv.can_own_workspace(text) IS
    'True when the current role is the workspace''s owner (its creator, or a member of that role) or a dataenv administrator: who may drop it, grant and revoke its members.';

-- Internal: whether a workspace exists, answered for any id as workspace_facts' found is.
CREATE OR REPLACE FUNCTION dataenv.workspace_exists(id text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace_exists.id);
END
$$;
COMMENT ON FUNCTION dataenv.workspace_exists(text) IS
    'Internal: whether a workspace exists (ids are unique, so create_workspace tells anyone that an id is taken anyway).';

-- Internal: facts about a workspace. Existence is answered for any id (ids are unique, so
-- create_workspace tells anyone that an id is taken anyway); whether it is a fork and its child
-- forks only to whoever may use it (the session's user), so nobody learns other tenants' ids.
CREATE OR REPLACE FUNCTION dataenv.workspace_facts(id text, OUT found boolean, OUT is_fork boolean, OUT children text[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT w.id IS NOT NULL,
           CASE WHEN v.visible THEN w.is_fork END,
           CASE WHEN v.visible
                THEN coalesce((SELECT array_agg(c.id ORDER BY c.id) FROM dataenv.workspaces c WHERE c.parent = workspace_facts.id), '{}')
                ELSE '{}'::text[] END
      FROM (SELECT 1) one
      LEFT JOIN dataenv.workspaces w ON w.id = workspace_facts.id
      CROSS JOIN LATERAL (SELECT w.id IS NOT NULL AND dataenv.workspace_access(workspace_facts.id, session_user) IS NOT NULL AS visible) v
$$;
COMMENT ON FUNCTION dataenv.workspace_facts(text) IS
    'Internal: whether a workspace exists; whether it is a fork and its child forks only when the session''s user may use it.';

-- Root workspace ids are single segments: an id with "/" is the shape of a fork path
-- (<ancestor>/<name>), and a root named "prod/x" would pass for a fork of prod. Roots created
-- before this rule keep their ids.
CREATE OR REPLACE FUNCTION dataenv.check_root_workspace_id(fn text, id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_workspace_id(fn, id);
    IF position('/' IN id) > 0 THEN
        RAISE EXCEPTION '%: workspace id % has a "/": that is the shape of a fork path, reserved for forks', fn, to_json(id)::text
            USING ERRCODE = '22023',
                  HINT = 'Root workspace ids are one segment ([a-z0-9][a-z0-9_.-]*); a fork of it may be named <root>/<name>.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_root_workspace_id(text, text) IS
    'Raises unless id is an acceptable root workspace id: a workspace id without "/" (the fork-path shape is reserved for forks).';

-- A fork id with "/" names where it sits: it must begin with the id of one of its ancestors
-- (the parent included) followed by "/", so "prod/x" can only be a fork under prod. Fork ids
-- without "/" are free (they never look like a path).
CREATE OR REPLACE FUNCTION dataenv.check_fork_id(fn text, parent text, fork text) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_workspace_id(fn, fork);
    IF position('/' IN fork) = 0 THEN
        RETURN;
    END IF;
    IF dataenv.workspace_access(parent, session_user) IS NULL THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(parent)::text, session_user USING ERRCODE = '42501';
    END IF;
    IF NOT EXISTS (
        WITH RECURSIVE chain(depth, id, parent) AS (
            SELECT 0, w.id, w.parent FROM dataenv.workspaces w WHERE w.id = check_fork_id.parent
            UNION ALL
            SELECT c.depth + 1, w.id, w.parent FROM chain c JOIN dataenv.workspaces w ON w.id = c.parent WHERE c.depth < 100
        )
        SELECT FROM chain c WHERE left(fork, octet_length(c.id) + 1) = c.id || '/') THEN
        RAISE EXCEPTION '%: fork id % has a "/" but does not start with the id of its parent or another ancestor followed by "/"', fn, to_json(fork)::text
            USING ERRCODE = '22023',
                  HINT = format('Name it %L, or use an id without "/".', parent || '/' || regexp_replace(fork, '^.*/', ''));
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_fork_id(text, text, text) IS
    'Raises unless fork is an acceptable id for a fork of parent: a workspace id that, when it has a "/", starts with the id of parent or of one of parent''s ancestors followed by "/".';

CREATE OR REPLACE FUNCTION dataenv.fork_copy_leftovers(workspace text) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*)::integer FROM dataenv.fork_copies c WHERE c.workspace = fork_copy_leftovers.workspace
$$;
COMMENT ON FUNCTION dataenv.fork_copy_leftovers(text) IS
    'Internal: how many fork copies are still registered for a workspace id (leftovers of a dropped fork included).';

-- The advisory lock class of a workspace id (second key: hashtext(id)): the sidecar holds it for
-- the whole of a create_fork or drop_fork, so two requests for one fork id never interleave. A
-- purpose of its own in dataenv.lock_class, so a workspace id never shares a key with a
-- cluster's lifecycle lock.
CREATE OR REPLACE FUNCTION dataenv.workspace_lock_class() RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT dataenv.lock_class('workspace') $$;
COMMENT ON FUNCTION dataenv.workspace_lock_class() IS
    'Advisory lock class id (first key) of the per-workspace-id lock the sidecar holds during create_fork and drop_fork.';
