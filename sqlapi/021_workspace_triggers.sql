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
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION dataenv.datatables_before_write() IS
    'Takes the cluster''s lifecycle lock for a datatable save and refuses a fork copy of another workspace.';
