-- ---------------------------------------------------------------------------------------------
-- Bindings: which databases may be bound to a workspace, and by whom
-- ---------------------------------------------------------------------------------------------
--
-- Binding a database to a workspace (dataenv.add_datatable; a lake catalog in dataenv.add_lake)
-- gives the workspace's members and jobs that database. It is a dataenv administrator's act, or
-- needs an explicit grant of that database to the binding role (dataenv.grant_database, admin
-- only). Some databases can never be bound, by anyone: the control database, a database holding
-- a dataenv installation, a template, PostgreSQL's and dataenv's own (postgres, template0/1,
-- pg_*, dataenv_*), and fork copies (which belong to the workspace they were made for). The SQL
-- checks what the control database can see (the instance cluster's own catalog); the sidecar
-- checks every bound database again when it is used (cluster.Admin.CheckBindable), for what only
-- a connection to it shows.

-- Raises unless database of cluster may be bound at all (whoever asks). fn names the caller.
CREATE OR REPLACE FUNCTION dataenv.check_bindable(fn text, cluster text, database text) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c dataenv.clusters;
    d record;
BEGIN
    c := dataenv.require_cluster(fn, cluster);
    PERFORM dataenv.check_name('database', database);
    IF EXISTS (SELECT FROM dataenv.fork_copies f WHERE f.cluster = c.name AND f.database = check_bindable.database)
       OR EXISTS (SELECT FROM dataenv.managed_databases m WHERE m.cluster = c.name AND m.name = check_bindable.database
                                                           AND m.for_workspace IS NOT NULL) THEN
        RAISE EXCEPTION '%: database % on cluster % is a fork copy; it belongs to the workspace it was made for and cannot be bound',
            fn, to_json(database)::text, to_json(c.name)::text
            USING ERRCODE = '42501', HINT = 'A fork reaches its copies by itself; bind the database the copy was made from instead.';
    END IF;
    IF c.kind <> 'instance' THEN
        RETURN;
    END IF;
    IF database = current_database() THEN
        RAISE EXCEPTION '%: database % is the dataenv control database; it can never be bound', fn, to_json(database)::text
            USING ERRCODE = '42501', HINT = 'Bind a database of your own data: create one with dataenv.create_database.';
    END IF;
    SELECT db.datistemplate INTO d FROM pg_catalog.pg_database db WHERE db.datname = check_bindable.database;
    IF FOUND AND d.datistemplate THEN
        RAISE EXCEPTION '%: database % is a template; it can never be bound', fn, to_json(database)::text
            USING ERRCODE = '42501', HINT = 'Bind a database made from it instead.';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_replication_slots s
                WHERE s.database = check_bindable.database AND s.slot_name LIKE 'dataenv\_%' AND s.plugin = 'pgoutput') THEN
        RAISE EXCEPTION '%: database % holds a dataenv installation; it can never be bound', fn, to_json(database)::text
            USING ERRCODE = '42501';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_bindable(text, text, text) IS
    'Raises unless a database may be bound to a workspace at all: not the control database, a dataenv installation, a template, a reserved name (postgres, template0/1, pg_*, dataenv_*) or a fork copy. The sidecar checks again when the database is used.';

-- Whether role may bind database of cluster: a dataenv administrator, or a grant of the database
-- to role or to a role it is a member of. Answers only for the session's own roles, or to an
-- administrator.
CREATE OR REPLACE FUNCTION dataenv.may_bind(cluster text, database text, role name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT dataenv.may_ask_about(role)
       AND (dataenv.is_dataenv_admin(role)
            OR EXISTS (SELECT FROM dataenv.database_grants g
                         JOIN pg_catalog.pg_roles gr ON gr.rolname = g.grantee
                         JOIN pg_catalog.pg_roles u ON u.rolname = may_bind.role
                        WHERE g.cluster = may_bind.cluster AND g.database = may_bind.database
                          AND pg_catalog.pg_has_role(u.oid, gr.oid, 'MEMBER')))
$$;
COMMENT ON FUNCTION dataenv.may_bind(text, text, name) IS
    'True when role may bind the database to a workspace: a dataenv administrator, or granted it (dataenv.grant_database) directly or through a role it is a member of.';

-- Raises unless role may bind database of cluster (check_bindable, then may_bind).
CREATE OR REPLACE FUNCTION dataenv.check_binding(fn text, cluster text, database text, role name) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_bindable(fn, cluster, database);
    IF NOT dataenv.may_bind(cluster, database, role) THEN
        RAISE EXCEPTION '%: permission denied: % may not bind database % of cluster %', fn, to_json(role::text)::text,
            to_json(database)::text, to_json(cluster)::text
            USING ERRCODE = '42501',
                  DETAIL = 'Binding a database to a workspace is a dataenv administrator''s act, or needs a grant of that database.',
                  HINT = format('A dataenv administrator binds it, or grants it to you first: SELECT dataenv.grant_database(%L, %L, %L);',
                                cluster, database, role);
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.check_binding(text, text, text, name) IS
    'Raises unless role may bind the database of the cluster to a workspace: it can be bound at all (dataenv.check_bindable) and role is an administrator or was granted it (dataenv.grant_database).';

CREATE OR REPLACE FUNCTION dataenv.grant_database(cluster text, database text, role name) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.grant_database';
BEGIN
    IF NOT dataenv.is_dataenv_admin(session_user) THEN
        RAISE EXCEPTION '%: permission denied: only dataenv administrators grant databases', fn USING ERRCODE = '42501';
    END IF;
    PERFORM dataenv.check_bindable(fn, cluster, database);
    IF role IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = role) THEN
        RAISE EXCEPTION '%: no role %', fn, coalesce(to_json(role::text)::text, 'NULL') USING ERRCODE = '42704';
    END IF;
    PERFORM dataenv.lock_cluster_lifecycle(cluster);
    INSERT INTO dataenv.database_grants (cluster, database, grantee, granted_by)
    VALUES (cluster, database, role, session_user)
    ON CONFLICT ON CONSTRAINT database_grants_pkey DO NOTHING;
END
$$;
COMMENT ON FUNCTION dataenv.grant_database(text, text, name) IS
    'dataenv_admin: lets role (and every member of it) bind database of cluster to the workspaces it may use (dataenv.add_datatable). The control database, dataenv installations, templates, reserved names and fork copies cannot be granted.';

-- unbind is new in this signature: the old one goes.
DROP FUNCTION IF EXISTS dataenv.revoke_database(text, text, name);
CREATE OR REPLACE FUNCTION dataenv.revoke_database(cluster text, database text, role name, unbind boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.revoke_database';
    bound text;
    lakes text;
    ws text[];
    nm text[];
BEGIN
    IF NOT dataenv.is_dataenv_admin(session_user) THEN
        RAISE EXCEPTION '%: permission denied: only dataenv administrators revoke databases', fn USING ERRCODE = '42501';
    END IF;
    PERFORM dataenv.lock_cluster_lifecycle(cluster);
    DELETE FROM dataenv.database_grants g
     WHERE g.cluster = revoke_database.cluster AND g.database = revoke_database.database AND g.grantee = revoke_database.role;
    -- Unbinding again after a plain revoke is allowed: the grant is gone already.
    IF NOT FOUND AND NOT unbind THEN
        RAISE EXCEPTION '%: database % of cluster % is not granted to %', fn, to_json(database)::text, to_json(cluster)::text,
            coalesce(to_json(role::text)::text, 'NULL') USING ERRCODE = 'P0002';
    END IF;
    -- What was bound under the grant: configured datatables made by role (or a member of it) who
    -- may no longer bind the database (another grant or being an administrator keeps a
    -- binding), and the keep_original entries of the forks below them, which share the database.
    WITH direct AS (
        SELECT d.workspace, d.name FROM dataenv.datatables d
         WHERE d.cluster = revoke_database.cluster AND d.database = revoke_database.database AND d.source = 'configured'
           AND EXISTS (SELECT FROM pg_catalog.pg_roles c, pg_catalog.pg_roles g
                        WHERE c.rolname = d.created_by AND g.rolname = revoke_database.role
                          AND pg_catalog.pg_has_role(c.oid, g.oid, 'MEMBER'))
           AND NOT dataenv.may_bind(d.cluster, d.database, d.created_by)),
    below AS (
        SELECT f.workspace, f.name FROM dataenv.datatables f
          JOIN dataenv.workspace_chain_all c ON c.workspace = f.workspace AND c.depth > 0
          JOIN direct r ON r.workspace = c.ancestor
         WHERE f.cluster = revoke_database.cluster AND f.database = revoke_database.database AND f.source = 'keep_original'),
    all_bound AS (SELECT * FROM direct UNION SELECT * FROM below)
    SELECT array_agg(workspace ORDER BY workspace, name), array_agg(name ORDER BY workspace, name),
           string_agg(workspace || '/' || name, ', ' ORDER BY workspace, name)
      INTO ws, nm, bound FROM all_bound;
    IF bound IS NOT NULL AND unbind THEN
        DELETE FROM dataenv.datatables d USING ROWS FROM (pg_catalog.unnest(ws), pg_catalog.unnest(nm)) AS r(workspace, name)
         WHERE d.workspace = r.workspace AND d.name = r.name;
        RAISE NOTICE '%: unbound datatables of database %: %', fn, to_json(database)::text, bound;
    ELSIF bound IS NOT NULL THEN
        RAISE NOTICE '%: datatables bound under the grant stay bound to database %: %', fn, to_json(database)::text, bound
            USING HINT = format('SELECT dataenv.revoke_database(%L, %L, %L, unbind => true) unbinds them (or dataenv.remove_datatable(workspace, name) one).',
                                cluster, database, role);
    END IF;
    SELECT string_agg(DISTINCT l.workspace || '/' || l.name, ', ') INTO lakes FROM dataenv.lakes l
     WHERE l.catalog_cluster = revoke_database.cluster AND l.catalog_database = revoke_database.database;
    IF lakes IS NOT NULL THEN
        RAISE NOTICE '%: lakes keep database % as their catalog: %', fn, to_json(database)::text, lakes
            USING HINT = 'A lake''s catalog holds its tables: dataenv.remove_lake(workspace, name) unbinds one.';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.revoke_database(text, text, name, boolean) IS
    'dataenv_admin: withdraws a grant of dataenv.grant_database. With unbind => true it also removes the datatables bound under the grant (configured entries made by role or its members who may no longer bind the database, and the keep_original entries of the forks below them), also when the grant was revoked already; otherwise they stay and a notice lists them. Lakes using the database as catalog stay (a notice lists them). Nothing on the cluster is dropped.';


-- Grants: administrators see all; a user sees the grants it holds (directly or through a role).
CREATE OR REPLACE VIEW dataenv.database_grant_list WITH (security_barrier) AS
SELECT g.cluster, g.database, g.grantee, g.granted_by, g.granted_at
  FROM dataenv.database_grants g
 WHERE dataenv.is_dataenv_admin(current_user)
    OR EXISTS (SELECT FROM pg_catalog.pg_roles gr WHERE gr.rolname = g.grantee
                                                 AND pg_catalog.pg_has_role(current_user, gr.oid, 'MEMBER'));
COMMENT ON VIEW dataenv.database_grant_list IS
    'Databases granted for binding (dataenv.grant_database): every grant for administrators, a user''s own (direct or through a role) for others.';

REVOKE ALL ON dataenv.database_grants FROM PUBLIC;
GRANT SELECT ON dataenv.database_grant_list TO dataenv_user, dataenv_admin;
REVOKE ALL ON FUNCTION
    dataenv.check_bindable(text, text, text), dataenv.may_bind(text, text, name), dataenv.check_binding(text, text, text, name),
    dataenv.grant_database(text, text, name), dataenv.revoke_database(text, text, name, boolean)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.grant_database(text, text, name), dataenv.revoke_database(text, text, name, boolean) TO dataenv_admin;
GRANT EXECUTE ON FUNCTION dataenv.check_bindable(text, text, text), dataenv.may_bind(text, text, name),
    dataenv.check_binding(text, text, text, name)
  TO dataenv_user, dataenv_admin;
