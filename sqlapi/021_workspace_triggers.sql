-- ---------------------------------------------------------------------------------------------
-- Triggers
-- ---------------------------------------------------------------------------------------------

-- is_fork, id and the creation columns never change; parent only ever becomes NULL (the
-- ON DELETE SET NULL of a dropped parent).
CREATE OR REPLACE FUNCTION dataenv.workspaces_before_update() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NEW.id IS DISTINCT FROM OLD.id OR NEW.is_fork IS DISTINCT FROM OLD.is_fork
       OR NEW.created_by IS DISTINCT FROM OLD.created_by OR NEW.created_by_request IS DISTINCT FROM OLD.created_by_request
       OR NEW.shared_lakes IS DISTINCT FROM OLD.shared_lakes OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
        RAISE EXCEPTION 'dataenv: workspace %: id, is_fork, shared_lakes and the creation columns cannot change', to_json(OLD.id)::text
            USING ERRCODE = '55000';
    END IF;
    IF NEW.parent IS NOT NULL AND NEW.parent IS DISTINCT FROM OLD.parent THEN
        RAISE EXCEPTION 'dataenv: workspace %: the parent of a fork cannot change', to_json(OLD.id)::text
            USING ERRCODE = '55000';
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_before_update() IS
    'Keeps a workspace''s id, is_fork flag and creation columns immutable; a parent can only become NULL (parent dropped).';
DROP TRIGGER IF EXISTS workspaces_before_update ON dataenv.workspaces;
CREATE TRIGGER workspaces_before_update BEFORE UPDATE ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_before_update();

-- A new workspace: a root id never has the fork-path shape, a fork id with "/" sits under one of
-- its ancestors, and nothing of a dropped workspace with the same id is left (a fork may be made
-- over data files a dropped fork left in its own prefix: they are inert and the next cleanup of
-- the same prefix sweeps them). Runs for every insert: create_workspace, a plain INSERT, and the
-- sidecar's create_fork.
CREATE OR REPLACE FUNCTION dataenv.workspaces_before_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    left_over text;
BEGIN
    IF NEW.is_fork THEN
        PERFORM dataenv.check_fork_id('dataenv.create_fork', NEW.parent, NEW.id);
    ELSE
        PERFORM dataenv.check_root_workspace_id('dataenv.create_workspace', NEW.id);
    END IF;
    SELECT string_agg(l.kind || ' ' || l.detail, '; ' ORDER BY l.kind, l.detail) INTO left_over
      FROM dataenv.workspace_leftovers(NEW.id) l
     WHERE NOT (NEW.is_fork AND l.kind = 'fork lake data')
       AND (NEW.created_by_request IS NULL OR l.created_by_request IS DISTINCT FROM NEW.created_by_request);
    IF left_over IS NOT NULL THEN
        IF dataenv.workspace_access(NEW.id, session_user) IS NULL THEN
            left_over := 'ask its owner or an administrator';  -- what is left is not the caller's to see
        END IF;
        RAISE EXCEPTION 'dataenv: workspace id % belonged to a dropped workspace whose cleanup is not finished (%)', to_json(NEW.id)::text, left_over
            USING ERRCODE = '55000',
                  HINT = format('The dropped workspace''s owner or an administrator finishes its cleanup: SELECT dataenv.drop_fork(%L) (an administrator removes lake rows of a dropped root with dataenv.remove_lake(%L, <lake>)). Then the id is free.', NEW.id, NEW.id);
    END IF;
    DELETE FROM dataenv.workspace_tombstones t WHERE t.id = NEW.id;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_before_insert() IS
    'Refuses a root id with "/", a fork id with "/" outside its ancestors, and any id of a dropped workspace whose leftovers are not cleaned up; clears the id''s tombstone.';
DROP TRIGGER IF EXISTS workspaces_before_insert ON dataenv.workspaces;
CREATE TRIGGER workspaces_before_insert BEFORE INSERT ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_before_insert();

-- A dropped workspace leaves a tombstone: its owner may finish the cleanup of what is left, and
-- its id is not free until nothing is (dataenv.bury_workspace removes the tombstone then).
CREATE OR REPLACE FUNCTION dataenv.workspaces_after_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO dataenv.workspace_tombstones (id, owner, is_fork, parent, created_by_request)
    VALUES (OLD.id, OLD.created_by, OLD.is_fork, OLD.parent, OLD.created_by_request)
    ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, is_fork = EXCLUDED.is_fork, parent = EXCLUDED.parent,
                                   created_by_request = EXCLUDED.created_by_request, dropped_at = now();
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_after_delete() IS 'Records a tombstone (owner, fork or root, parent) for a dropped workspace.';
DROP TRIGGER IF EXISTS workspaces_after_delete ON dataenv.workspaces;
CREATE TRIGGER workspaces_after_delete AFTER DELETE ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_after_delete();

-- The creator becomes a member. created_by is current_user for users (they may only insert id).
CREATE OR REPLACE FUNCTION dataenv.workspaces_after_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO dataenv.workspace_members (workspace, member, granted_by)
    VALUES (NEW.id, NEW.created_by, NEW.created_by)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspaces_after_insert() IS 'Makes the creator of a workspace its first member.';
DROP TRIGGER IF EXISTS workspaces_after_insert ON dataenv.workspaces;
CREATE TRIGGER workspaces_after_insert AFTER INSERT ON dataenv.workspaces
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspaces_after_insert();

-- A datatable is saved under the lifecycle lock of its cluster, and may name a fork copy only of
-- its own workspace or of one of its ancestors (what keep_original inherits).
CREATE OR REPLACE FUNCTION dataenv.datatables_before_write() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner_ws text;
BEGIN
    PERFORM dataenv.lock_cluster_lifecycle(NEW.cluster);
    SELECT c.workspace INTO owner_ws FROM dataenv.fork_copies c
     WHERE c.cluster = NEW.cluster AND c.database = NEW.database;
    IF FOUND AND NOT EXISTS (SELECT FROM dataenv.workspace_chain_all ch
                              WHERE ch.workspace = NEW.workspace AND ch.ancestor = owner_ws) THEN
        RAISE EXCEPTION 'dataenv: database % on cluster % is a fork copy made for workspace %; workspace % cannot use it',
            to_json(NEW.database)::text, to_json(NEW.cluster)::text, to_json(owner_ws)::text, to_json(NEW.workspace)::text
            USING ERRCODE = '42501',
                  DETAIL = 'A fork copy belongs to the workspace it was made for (and that workspace''s forks); its name is not an authorization.';
    END IF;
    -- A user's binding (the sidecar writes the other sources: a fork's entries, whose databases
    -- are its parent's or its own copies). created_by is the inserting role: users cannot set it.
    IF NEW.source = 'configured' THEN
        PERFORM dataenv.check_binding('dataenv.add_datatable', NEW.cluster, NEW.database, NEW.created_by);
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.datatables_before_write() IS
    'Takes the cluster''s lifecycle lock for a datatable save, checks a user''s binding (dataenv.check_binding) and refuses a fork copy of another workspace.';
