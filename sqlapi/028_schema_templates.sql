-- Schema templates (table: migrations/023_schema_templates.up.sql; sidecar:
-- sidecar/internal/workspace/template.go). A schema_only fork of a datatable whose parent's schema
-- has not changed since its template was built is a TEMPLATE copy of the template. The template
-- belongs to the datatable entry (workspace, datatable) whose database it copies: it counts as a
-- use of that database, and removing the entry (remove_datatable, drop_workspace, drop_fork)
-- enqueues a refresh_schema_template request that drops it.

-- ---------------------------------------------------------------------------------------------
-- Visibility
-- ---------------------------------------------------------------------------------------------

ALTER TABLE dataenv.schema_templates ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS schema_templates_select ON dataenv.schema_templates;
CREATE POLICY schema_templates_select ON dataenv.schema_templates FOR SELECT USING (dataenv.can_use_workspace(workspace));

CREATE OR REPLACE VIEW dataenv.schema_template_list WITH (security_barrier) AS
SELECT t.workspace, t.datatable, t.cluster, t.database, t.parent_database, t.owner, t.state, t.fingerprint,
       t.created_by_request, t.created_at, t.ready_at, t.spare_of, t.role
  FROM dataenv.schema_templates t
 WHERE dataenv.can_use_workspace(t.workspace);
COMMENT ON VIEW dataenv.schema_template_list IS
    'The schema templates of the datatables of workspaces the caller may use: the database schema_only forks are copied from while the parent''s schema is unchanged (state ready), with the fingerprint of the schema it holds. A row with spare_of is a spare: a TEMPLATE copy of that template made in the background, which the next schema_only fork renames into its copy instead of copying the template while it waits (taken: a fork is doing so); role is the spare''s own role, which owns it and its objects and becomes the workspace role of a fork that takes it. A row in state dropping is being dropped, and never used.';

-- Internal: how many templates a datatable entry still has (visible or not), counting each
-- unfinished refresh of the entry as one it may still register: a refresh that read the entry
-- before its removal builds a template after it (datatables_after_delete).
CREATE OR REPLACE FUNCTION dataenv.schema_template_leftovers(workspace text, datatable text) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (SELECT count(*)::integer FROM dataenv.schema_templates t
             WHERE t.workspace = schema_template_leftovers.workspace AND t.datatable = schema_template_leftovers.datatable)
         + (SELECT count(*)::integer FROM dataenv.requests r
             WHERE r.status IN ('pending', 'running') AND r.kind = 'refresh_schema_template'
               AND r.args->>'workspace' = schema_template_leftovers.workspace
               AND r.args->>'datatable' = schema_template_leftovers.datatable)
$$;
COMMENT ON FUNCTION dataenv.schema_template_leftovers(text, text) IS
    'Internal: how many schema templates of a datatable entry are still registered (leftovers of a removed entry included), or may be by an unfinished refresh of it.';

-- ---------------------------------------------------------------------------------------------
-- Uses: a template names its parent database and its own
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION dataenv.managed_database_uses__schema_templates(cluster text, database text)
RETURNS TABLE (kind text, name text, detail text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'schema template', t.workspace || '/' || t.datatable, format('template %s of this database (%s)', t.database, t.state)
      FROM dataenv.schema_templates t
     WHERE t.cluster = managed_database_uses__schema_templates.cluster AND t.parent_database = managed_database_uses__schema_templates.database
       -- a spare goes with its template, which holds the parent already
       AND t.spare_of IS NULL
       -- a template of a removed entry is garbage its cleanup request drops: it does not hold the parent
       AND EXISTS (SELECT FROM dataenv.datatables d WHERE d.workspace = t.workspace AND d.name = t.datatable)
    UNION ALL
    SELECT 'schema template', t.workspace || '/' || t.datatable,
           CASE WHEN t.spare_of IS NULL THEN format('schema template of %s (%s)', t.parent_database, t.state)
                ELSE format('spare of schema template %s of %s (%s)', t.spare_of, t.parent_database, t.state) END
      FROM dataenv.schema_templates t
     WHERE t.cluster = managed_database_uses__schema_templates.cluster AND t.database = managed_database_uses__schema_templates.database
$$;
COMMENT ON FUNCTION dataenv.managed_database_uses__schema_templates(text, text) IS
    'Uses of a database by schema templates: the template of a datatable entry (workspace/datatable) uses its parent database while the entry exists (a removed entry''s template waits for its cleanup, not the parent), and the template database itself; a spare of a template uses its own database.';

-- A workspace id is not free while a template of one of its entries is registered.
CREATE OR REPLACE FUNCTION dataenv.workspace_leftovers__schema_templates(workspace text)
RETURNS TABLE (kind text, detail text, created_by_request uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'schema template', format('%s of datatable %s on cluster %s (%s)', t.database, t.datatable, t.cluster, t.state), t.created_by_request
      FROM dataenv.schema_templates t WHERE t.workspace = workspace_leftovers__schema_templates.workspace
$$;
COMMENT ON FUNCTION dataenv.workspace_leftovers__schema_templates(text) IS
    'Leftovers of a workspace id among schema templates: the registered templates of its datatable entries.';

-- ---------------------------------------------------------------------------------------------
-- Request: refresh_schema_template
-- ---------------------------------------------------------------------------------------------

-- SECURITY INVOKER: a member may refresh the template of an entry of a workspace they may use;
-- anyone may ask for the cleanup of the templates of an entry that no longer exists (the request
-- then only drops them).
CREATE OR REPLACE FUNCTION dataenv.validate_refresh_schema_template(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ws text := args->>'workspace';
    dt text := args->>'datatable';
BEGIN
    PERFORM dataenv.check_request_keys('refresh_schema_template', args, ARRAY['workspace', 'datatable'], ARRAY[]::text[]);
    PERFORM dataenv.check_workspace_id('refresh_schema_template', ws);
    PERFORM dataenv.check_datatable_name('refresh_schema_template', dt);
    IF (dataenv.workspace_facts(ws)).found AND dataenv.can_use_workspace(ws) THEN
        RETURN;
    END IF;
    IF dataenv.schema_template_leftovers(ws, dt) = 0 THEN
        RAISE EXCEPTION 'refresh_schema_template: no workspace % that % may use, and no schema template of its datatable % to clean up',
            to_json(ws)::text, current_user, to_json(dt)::text USING ERRCODE = '42501';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.validate_refresh_schema_template(jsonb) IS 'Validates the args of a refresh_schema_template request.';

-- Policy any: the cleanup of a removed entry's templates is made by whoever removed it (the
-- workspace may be gone, and with it every membership). The validator and the sidecar refuse a
-- build for anyone but a member of the workspace; a cleanup only drops what nothing may use.
INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description) VALUES
    ('refresh_schema_template', 'dataenv.validate_refresh_schema_template(jsonb)'::regprocedure, 'any', NULL,
     'Brings the schema template of a datatable entry up to date with its database''s schema (built when missing or stale); drops the templates of an entry that no longer exists.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

CREATE OR REPLACE FUNCTION dataenv.refresh_schema_template(workspace text, datatable text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('refresh_schema_template', jsonb_build_object('workspace', workspace, 'datatable', datatable))
    RETURNING id
$$;
COMMENT ON FUNCTION dataenv.refresh_schema_template(text, text) IS
    'Requests that the schema template of datatable of workspace be built now (or rebuilt if the database''s schema changed), so that the next schema_only fork is a TEMPLATE copy. create_fork requests it by itself after a schema_only fork made by dump. Returns the request id.';

-- Removing a datatable entry (remove_datatable, or its workspace dropped) enqueues the cleanup of
-- its templates, in the same transaction, as the role that removed it. Always a request of its
-- own: one still pending may already be running, having read the entry before this removal
-- commits, and it would then keep the templates. So is a removal while a refresh of the entry is
-- unfinished and has not registered its template yet: it may have read the entry already and
-- build one. The cleanup waits for that refresh's template lock and drops what it built; a
-- refresh that had not read the entry yet finds it gone and builds nothing.
CREATE OR REPLACE FUNCTION dataenv.datatables_after_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dataenv.schema_template_leftovers(OLD.workspace, OLD.name) > 0 THEN
        INSERT INTO dataenv.requests (kind, args, requested_by)
        VALUES ('refresh_schema_template', jsonb_build_object('workspace', OLD.workspace, 'datatable', OLD.name), session_user);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.datatables_after_delete() IS
    'Enqueues the cleanup of the schema templates of a removed datatable entry (a refresh_schema_template request).';
DROP TRIGGER IF EXISTS datatables_after_delete ON dataenv.datatables;
CREATE TRIGGER datatables_after_delete AFTER DELETE ON dataenv.datatables
    FOR EACH ROW EXECUTE FUNCTION dataenv.datatables_after_delete();

-- ---------------------------------------------------------------------------------------------
-- Grants
-- ---------------------------------------------------------------------------------------------

REVOKE ALL ON dataenv.schema_templates FROM PUBLIC;
GRANT SELECT ON dataenv.schema_templates, dataenv.schema_template_list TO dataenv_user, dataenv_admin;
REVOKE EXECUTE ON FUNCTION
    dataenv.schema_template_leftovers(text, text), dataenv.managed_database_uses__schema_templates(text, text),
    dataenv.workspace_leftovers__schema_templates(text),
    dataenv.refresh_schema_template(text, text), dataenv.datatables_after_delete()
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.schema_template_leftovers(text, text), dataenv.refresh_schema_template(text, text)
  TO dataenv_user, dataenv_admin;
