-- ---------------------------------------------------------------------------------------------
-- Protection: dataenv.protect_workspace / dataenv.unprotect_workspace
-- ---------------------------------------------------------------------------------------------
-- A protected workspace cannot be dropped (drop_fork, drop_workspace), expired, or have its
-- datatables and lakes removed. Protection is a column of dataenv.workspaces, set in the
-- caller's transaction; it is checked where each destructive act is asked for (an immediate
-- error) and again where it happens: triggers on dataenv.workspaces, dataenv.datatables and
-- dataenv.lakes refuse the delete, and the sidecar's drop_fork re-reads it (a request already
-- queued, or a cascade reaching a protected child, is refused before anything is dropped).

-- Internal: raises, saying how to unprotect, when workspace is protected; with
-- with_descendants, when any of its forks below (those the caller may see) is.
CREATE OR REPLACE FUNCTION dataenv.refuse_protected(fn text, workspace text, what text,
                                                    with_descendants boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    hit text[];
BEGIN
    WITH RECURSIVE d AS (
        SELECT w.id, w.protected, 0 AS depth FROM dataenv.workspaces w WHERE w.id = refuse_protected.workspace
        UNION ALL
        SELECT w.id, w.protected, d.depth + 1 FROM dataenv.workspaces w JOIN d ON w.parent = d.id
         WHERE with_descendants AND d.depth < 100)
    SELECT array_agg(d.id ORDER BY d.depth, d.id) INTO hit FROM d WHERE d.protected;
    IF hit IS NULL THEN
        RETURN;
    END IF;
    IF hit = ARRAY[workspace] THEN
        RAISE EXCEPTION '%: workspace % is protected: it cannot %', fn, to_json(workspace)::text, what
            USING ERRCODE = '55000',
                  HINT = format('Its owner or a dataenv administrator unprotects it first: SELECT dataenv.unprotect_workspace(%L);', workspace);
    END IF;
    RAISE EXCEPTION '%: protected workspaces (%) are in the way: % cannot %', fn, array_to_string(hit, ', '), to_json(workspace)::text, what
        USING ERRCODE = '55000',
              HINT = format('Their owners or a dataenv administrator unprotect them first: SELECT dataenv.unprotect_workspace(%L);', hit[1]);
END
$$;
COMMENT ON FUNCTION dataenv.refuse_protected(text, text, text, boolean) IS
    'Internal: raises (55000, saying how to unprotect) when the workspace, or with with_descendants one of the forks below it that the caller may see, is protected; what names the refused act.';

-- Internal: sets or clears the protection of a workspace the caller owns.
CREATE OR REPLACE FUNCTION dataenv.set_workspace_protection(fn text, workspace text, protect boolean) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    caller name := dataenv.acting_role();
    access text;
BEGIN
    PERFORM dataenv.check_workspace_id(fn, workspace);
    access := dataenv.workspace_access(workspace, caller);
    IF access IS NULL OR NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = set_workspace_protection.workspace) THEN
        RAISE EXCEPTION '%: no workspace % that % may use', fn, to_json(workspace)::text, caller USING ERRCODE = '42501';
    END IF;
    IF access NOT IN ('owner', 'admin') THEN
        RAISE EXCEPTION '%: % is not the owner of workspace %', fn, caller, to_json(workspace)::text
            USING ERRCODE = '42501',
                  HINT = format('Only its owner (%s) or a dataenv administrator may change its protection.',
                                (SELECT w.created_by FROM dataenv.workspaces w WHERE w.id = set_workspace_protection.workspace));
    END IF;
    UPDATE dataenv.workspaces w
       SET protected = protect,
           protected_by = CASE WHEN protect THEN coalesce(w.protected_by, caller) END,
           protected_at = CASE WHEN protect THEN coalesce(w.protected_at, now()) END
     WHERE w.id = set_workspace_protection.workspace AND w.protected IS DISTINCT FROM protect;
END
$$;
COMMENT ON FUNCTION dataenv.set_workspace_protection(text, text, boolean) IS
    'Internal: protect_workspace and unprotect_workspace (owner or administrator; idempotent).';

CREATE OR REPLACE FUNCTION dataenv.protect_workspace(workspace text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.set_workspace_protection('dataenv.protect_workspace', workspace, true)
$$;
COMMENT ON FUNCTION dataenv.protect_workspace(text) IS
    'Protects a workspace (its owner or a dataenv administrator; in the caller''s transaction): until unprotect_workspace it cannot be dropped (drop_fork, drop_workspace), expired, or have its datatables and lakes removed. Already protected: nothing changes.';

CREATE OR REPLACE FUNCTION dataenv.unprotect_workspace(workspace text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.set_workspace_protection('dataenv.unprotect_workspace', workspace, false)
$$;
COMMENT ON FUNCTION dataenv.unprotect_workspace(text) IS
    'Removes the protection of a workspace (its owner or a dataenv administrator). A fork whose expiry has passed expires at the sidecar''s next sweep.';

-- Triggers: the guard wherever a delete comes from (a function, a plain DELETE, the sidecar).
-- A datatable or lake row of a workspace that is itself being deleted (an unprotected one) finds
-- no workspace row and goes.
CREATE OR REPLACE FUNCTION dataenv.refuse_protected_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ws text;
    what text;
BEGIN
    IF TG_TABLE_NAME = 'workspaces' THEN
        IF NOT OLD.protected THEN
            RETURN OLD;
        END IF;
        ws := OLD.id;
        what := 'be dropped';
    ELSE
        ws := OLD.workspace;
        IF NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = ws AND w.protected) THEN
            RETURN OLD;
        END IF;
        what := CASE TG_TABLE_NAME WHEN 'datatables' THEN format('have its datatable %s removed', to_json(OLD.name)::text)
                                   ELSE format('have its lake %s removed', to_json(OLD.name)::text) END;
    END IF;
    RAISE EXCEPTION 'dataenv: workspace % is protected: it cannot %', to_json(ws)::text, what
        USING ERRCODE = '55000',
              HINT = format('Its owner or a dataenv administrator unprotects it first: SELECT dataenv.unprotect_workspace(%L);', ws);
END
$$;
COMMENT ON FUNCTION dataenv.refuse_protected_delete() IS
    'Refuses deleting a protected workspace, or a datatable or lake of one.';

DROP TRIGGER IF EXISTS workspaces_refuse_protected ON dataenv.workspaces;
CREATE TRIGGER workspaces_refuse_protected BEFORE DELETE ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.refuse_protected_delete();
DROP TRIGGER IF EXISTS datatables_refuse_protected ON dataenv.datatables;
CREATE TRIGGER datatables_refuse_protected BEFORE DELETE ON dataenv.datatables
    FOR EACH ROW EXECUTE FUNCTION dataenv.refuse_protected_delete();
DROP TRIGGER IF EXISTS lakes_refuse_protected ON dataenv.lakes;
CREATE TRIGGER lakes_refuse_protected BEFORE DELETE ON dataenv.lakes
    FOR EACH ROW EXECUTE FUNCTION dataenv.refuse_protected_delete();

REVOKE ALL ON FUNCTION dataenv.refuse_protected(text, text, text, boolean), dataenv.set_workspace_protection(text, text, boolean),
    dataenv.protect_workspace(text), dataenv.unprotect_workspace(text), dataenv.refuse_protected_delete() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.refuse_protected(text, text, text, boolean), dataenv.set_workspace_protection(text, text, boolean),
    dataenv.protect_workspace(text), dataenv.unprotect_workspace(text) TO dataenv_user, dataenv_admin;
