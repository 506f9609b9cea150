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

-- Whether role is (or is a member of) one of the workspace's member roles. SECURITY DEFINER so
-- that policies on workspace_members itself can use it without recursing; it answers only this
-- yes/no question.
CREATE OR REPLACE FUNCTION dataenv.is_workspace_member(workspace text, role name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM dataenv.workspace_members m
                     JOIN pg_catalog.pg_roles r ON r.rolname = m.member
                     JOIN pg_catalog.pg_roles u ON u.rolname = is_workspace_member.role
                    WHERE m.workspace = is_workspace_member.workspace
                      AND pg_catalog.pg_has_role(u.oid, r.oid, 'MEMBER'))
$$;
COMMENT ON FUNCTION dataenv.is_workspace_member(text, name) IS
    'True when role is one of the workspace''s member roles or a member of one.';

-- The caller may use the workspace: a member, or dataenv_admin. (The SET clause keeps it from
-- being inlined into policies.)
CREATE OR REPLACE FUNCTION dataenv.can_use_workspace(workspace text) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_catalog.pg_has_role(current_user, 'dataenv_admin', 'MEMBER')
        OR dataenv.is_workspace_member(can_use_workspace.workspace, current_user)
$$;
COMMENT ON FUNCTION dataenv.can_use_workspace(text) IS
    'True when the current role may use the workspace: it is a member (directly or through a member role) or dataenv_admin.';

-- Internal: facts about any workspace, visible or not (existence is not a secret; contents are).
CREATE OR REPLACE FUNCTION dataenv.workspace_facts(id text, OUT found boolean, OUT is_fork boolean, OUT children text[])
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace_facts.id),
           (SELECT w.is_fork FROM dataenv.workspaces w WHERE w.id = workspace_facts.id),
           coalesce((SELECT array_agg(c.id ORDER BY c.id) FROM dataenv.workspaces c WHERE c.parent = workspace_facts.id), '{}')
$$;
COMMENT ON FUNCTION dataenv.workspace_facts(text) IS
    'Internal: whether a workspace exists, whether it is a fork, and its child forks, whoever may see it.';

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
