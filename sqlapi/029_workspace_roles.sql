-- Per-workspace managed roles (migrations/012_workspace_roles.up.sql): what dataenv created for
-- each workspace on each cluster, without passwords. The sidecar creates and converges them.

CREATE OR REPLACE VIEW dataenv.workspace_role_list AS
SELECT r.cluster, r.workspace, r.role, r.role_oid, r.incarnation, r.created_at,
       coalesce((SELECT array_agg(d.database ORDER BY d.database) FROM dataenv.workspace_role_databases d
                  WHERE d.cluster = r.cluster AND d.workspace = r.workspace), '{}') AS databases
  FROM dataenv.workspace_roles r;
COMMENT ON VIEW dataenv.workspace_role_list IS
    'The managed role of each workspace on each cluster it uses (jobs and members reach the cluster as it), with the databases it was granted something in. No passwords.';

REVOKE ALL ON dataenv.workspace_roles, dataenv.workspace_role_secrets, dataenv.workspace_role_databases FROM PUBLIC;
REVOKE ALL ON dataenv.workspace_role_list FROM PUBLIC;
GRANT SELECT ON dataenv.workspace_role_list TO dataenv_admin;

-- Using a workspace from one's own tools (psql, an application, the DuckDB CLI, Python, dbt):
-- members reach the workspace's databases and lakes as the workspace's managed role on each
-- cluster (migrations/012_workspace_roles.up.sql), the role its jobs run as, with what the parent
-- gave the application and nothing of other workspaces.
--
--   dataenv.prepare_connection(workspace)  request: the roles, their grants on every datatable,
--                                          the lake namespaces (bootstrapped, defer views made)
--                                          and the DuckDB script; create_fork does it for a fork
--   dataenv.connection_info(workspace)     a row per datatable: where to connect, as which role
--   dataenv.connection_password(workspace, cluster)
--                                          the role's password, for members only
--   dataenv.duckdb_script(workspace)       DuckDB SQL: secrets + attaches of the lakes
--   dataenv.rotate_credentials(workspace)  request (owner): new passwords for the roles
--
-- Passwords live in dataenv.workspace_role_secrets, readable by the sidecar's role only; the
-- definer functions below hand them to members of the workspace (checked for the role the
-- session acts as, never current_user) and to nobody else. They never appear in a request's
-- args or result, a view, an error or a log line (a function's result is not logged).

-- The caller (the role the session acts as) may use the workspace; the same refusal whether the
-- workspace exists or not.
CREATE OR REPLACE FUNCTION dataenv.require_workspace_user(fn text, workspace text) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF workspace IS NULL OR workspace = '' THEN
        RAISE EXCEPTION '%: workspace is required', fn USING ERRCODE = '22023';
    END IF;
    IF dataenv.workspace_access(workspace, dataenv.acting_role()) IS NULL
       OR NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = workspace) THEN
        RAISE EXCEPTION '%: % may not use workspace % (or there is no such workspace)', fn,
            to_json(dataenv.acting_role()::text)::text, to_json(workspace)::text
            USING ERRCODE = '42501', HINT = 'The workspace''s owner grants it: SELECT dataenv.grant_workspace(workspace, role).';
    END IF;
END
$$;
COMMENT ON FUNCTION dataenv.require_workspace_user(text, text) IS
    'Internal: raises 42501 unless the role the session acts as (SET ROLE, else session_user) may use the workspace; says the same for a workspace that does not exist.';

-- s as a DuckDB string literal (DuckDB has no E'' strings: quotes doubled, backslashes as is).
CREATE OR REPLACE FUNCTION dataenv.duckdb_literal(s text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT '''' || pg_catalog.replace(s, '''', '''''') || ''''
$$;
COMMENT ON FUNCTION dataenv.duckdb_literal(text) IS 'Internal: s as a DuckDB string literal (single quotes doubled).';

-- Percent-encodes everything but RFC 3986's unreserved characters (for a libpq URI).
CREATE OR REPLACE FUNCTION dataenv.uri_encode(s text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(pg_catalog.string_agg(
               CASE WHEN t.ch ~ '^[A-Za-z0-9._~-]$' THEN t.ch
                    ELSE (SELECT pg_catalog.string_agg('%' || pg_catalog.upper(pg_catalog.lpad(pg_catalog.to_hex(
                                     pg_catalog.get_byte(pg_catalog.convert_to(t.ch, 'UTF8'), b)), 2, '0')), '' ORDER BY b)
                            FROM pg_catalog.generate_series(0, pg_catalog.octet_length(pg_catalog.convert_to(t.ch, 'UTF8')) - 1) b)
               END, '' ORDER BY t.ord), '')
      FROM pg_catalog.regexp_split_to_table(s, '') WITH ORDINALITY AS t(ch, ord)
$$;
COMMENT ON FUNCTION dataenv.uri_encode(text) IS 'Internal: percent-encodes s for a libpq URI (all but letters, digits and -._~).';

-- A libpq URI without a password: postgresql://role@host:port/database?sslmode=...
-- A unix socket directory is percent-encoded in the host part, an IPv6 address bracketed.
CREATE OR REPLACE FUNCTION dataenv.libpq_uri(host text, port integer, database text, role text, sslmode text) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'postgresql://' || coalesce(dataenv.uri_encode(role) || '@', '')
        || CASE WHEN host LIKE '%:%' AND host NOT LIKE '/%' THEN '[' || host || ']' ELSE dataenv.uri_encode(host) END
        || ':' || port || '/' || dataenv.uri_encode(database)
        || coalesce('?sslmode=' || dataenv.uri_encode(sslmode), '')
$$;
COMMENT ON FUNCTION dataenv.libpq_uri(text, integer, text, text, text) IS
    'A libpq connection URI without a password (postgresql://role@host:port/database?sslmode=...): give the password with PGPASSWORD or a ~/.pgpass line.';

-- The clusters a workspace's members reach: its datatables' and its lakes' catalogs.
CREATE OR REPLACE FUNCTION dataenv.workspace_clusters(workspace text) RETURNS SETOF text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.cluster FROM dataenv.datatable_resolution_all r WHERE r.workspace = workspace_clusters.workspace
    UNION
    SELECT l.catalog_cluster FROM dataenv.lakes l WHERE l.workspace = workspace_clusters.workspace
$$;
COMMENT ON FUNCTION dataenv.workspace_clusters(text) IS
    'Internal: the clusters a workspace uses (its datatables'' resolved databases and its lakes'' catalogs).';

-- The workspace's role on cluster, when it was made for this incarnation of the workspace.
CREATE OR REPLACE FUNCTION dataenv.current_workspace_role(workspace text, cluster text) RETURNS dataenv.workspace_roles
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT r.* FROM dataenv.workspace_roles r JOIN dataenv.workspaces w ON w.id = r.workspace
     WHERE r.workspace = current_workspace_role.workspace AND r.cluster = current_workspace_role.cluster
       AND r.incarnation = w.created_at AND r.role_oid IS NOT NULL
$$;
COMMENT ON FUNCTION dataenv.current_workspace_role(text, text) IS
    'Internal: the record of a workspace''s managed role on a cluster, if it exists for the workspace''s current incarnation.';

CREATE OR REPLACE FUNCTION dataenv.connection_info(workspace text)
RETURNS TABLE (datatable text, cluster text, host text, port integer, database text, role text, sslmode text,
               uri text, ready boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM dataenv.require_workspace_user('dataenv.connection_info', workspace);
    RETURN QUERY
    SELECT r.datatable, r.cluster, c.host, c.port, r.database, wr.role, c.sslmode,
           dataenv.libpq_uri(c.host, c.port, r.database, wr.role, c.sslmode),
           (wr.role IS NOT NULL
            AND EXISTS (SELECT FROM dataenv.workspace_role_databases d
                         WHERE d.cluster = r.cluster AND d.workspace = r.workspace AND d.database = r.database)
            AND EXISTS (SELECT FROM dataenv.workspace_role_secrets s
                         WHERE s.cluster = r.cluster AND s.workspace = r.workspace AND s.password IS NOT NULL))
      FROM dataenv.datatable_resolution_all r
      JOIN dataenv.clusters c ON c.name = r.cluster
      LEFT JOIN LATERAL dataenv.current_workspace_role(r.workspace, r.cluster) wr ON true
     WHERE r.workspace = connection_info.workspace
     ORDER BY r.datatable;
END
$$;
COMMENT ON FUNCTION dataenv.connection_info(text) IS
    'Members of the workspace: a row per datatable with where to connect (cluster, host, port, database: a fork''s own copy or the database it shares), the workspace''s managed role on that cluster, sslmode, and a libpq URI without the password (dataenv.connection_password gives it). ready is false until dataenv.prepare_connection (or create_fork, for a fork) has given the role its grants there. Refused to anyone else.';

CREATE OR REPLACE FUNCTION dataenv.connection_password(workspace text, cluster text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.connection_password';
    c text := cluster;
    used text[];
    pw text;
BEGIN
    PERFORM dataenv.require_workspace_user(fn, workspace);
    SELECT pg_catalog.array_agg(u ORDER BY u) INTO used FROM dataenv.workspace_clusters(workspace) u;
    IF c IS NULL THEN
        IF pg_catalog.cardinality(used) = 1 THEN
            c := used[1];
        ELSE
            RAISE EXCEPTION '%: workspace % uses % clusters (%): name one', fn, to_json(workspace)::text,
                coalesce(pg_catalog.cardinality(used), 0), coalesce(pg_catalog.array_to_string(used, ', '), 'none')
                USING ERRCODE = '22023', HINT = 'SELECT dataenv.connection_password(workspace, cluster); connection_info says which cluster each datatable is on.';
        END IF;
    ELSIF NOT c = ANY (coalesce(used, '{}')) THEN
        RAISE EXCEPTION '%: workspace % uses no database of cluster %', fn, to_json(workspace)::text, to_json(c)::text
            USING ERRCODE = '22023', HINT = format('It uses: %s.', coalesce(pg_catalog.array_to_string(used, ', '), 'none'));
    END IF;
    SELECT s.password INTO pw
      FROM dataenv.current_workspace_role(workspace, c) r
      JOIN dataenv.workspace_role_secrets s ON s.cluster = r.cluster AND s.workspace = r.workspace;
    IF pw IS NULL THEN
        RAISE EXCEPTION '%: workspace % has no role on cluster % yet', fn, to_json(workspace)::text, to_json(c)::text
            USING ERRCODE = '55000', HINT = format('Prepare it: SELECT dataenv.prepare_connection(%L) AS id \gset, then SELECT status, error FROM dataenv.wait(:''id'');', workspace);
    END IF;
    RETURN pw;
END
$$;
COMMENT ON FUNCTION dataenv.connection_password(text, text) IS
    'Members of the workspace: the password of its managed role on cluster (default: the one cluster the workspace uses). Use it with connection_info''s uri (PGPASSWORD, ~/.pgpass). Refused to anyone else; rotate it with dataenv.rotate_credentials.';

-- s3_credentials placeholder: the DuckDB S3 secret options that hold the storage's keys.
CREATE OR REPLACE FUNCTION dataenv.duckdb_s3_credentials(storage text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN coalesce(s.credentials->>'access_key_id', '') = '' THEN 'PROVIDER credential_chain'
                ELSE 'KEY_ID ' || dataenv.duckdb_literal(s.credentials->>'access_key_id')
                     || ', SECRET ' || dataenv.duckdb_literal(coalesce(s.credentials->>'secret_access_key', ''))
                     || coalesce(', SESSION_TOKEN ' || dataenv.duckdb_literal(nullif(s.credentials->>'session_token', '')), '')
           END
      FROM (SELECT (SELECT sec.credentials FROM dataenv.storage_secrets sec WHERE sec.storage = duckdb_s3_credentials.storage) AS credentials) s
$$;
COMMENT ON FUNCTION dataenv.duckdb_s3_credentials(text) IS
    'Internal: the key options of a DuckDB S3 secret for a storage (KEY_ID, SECRET, SESSION_TOKEN, or PROVIDER credential_chain).';

CREATE OR REPLACE FUNCTION dataenv.duckdb_script(workspace text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.duckdb_script';
    script text;
    m text[];
    val text;
BEGIN
    PERFORM dataenv.require_workspace_user(fn, workspace);
    SELECT t.script INTO script FROM dataenv.workspace_tool_scripts t WHERE t.workspace = duckdb_script.workspace;
    IF script IS NULL THEN
        RAISE EXCEPTION '%: workspace % has no DuckDB script yet', fn, to_json(workspace)::text
            USING ERRCODE = '55000', HINT = format('Prepare it: SELECT dataenv.prepare_connection(%L) AS id \gset, then SELECT status, error FROM dataenv.wait(:''id'');', workspace);
    END IF;
    FOR m IN SELECT DISTINCT pg_catalog.regexp_matches(script, '\{\{(pg_password|s3_credentials):([a-z0-9_]+)\}\}', 'g') LOOP
        IF m[1] = 'pg_password' THEN
            SELECT dataenv.duckdb_literal(s.password) INTO val
              FROM dataenv.current_workspace_role(workspace, m[2]) r
              JOIN dataenv.workspace_role_secrets s ON s.cluster = r.cluster AND s.workspace = r.workspace;
            IF val IS NULL THEN
                RAISE EXCEPTION '%: workspace % has no role on cluster % any more', fn, to_json(workspace)::text, to_json(m[2])::text
                    USING ERRCODE = '55000', HINT = format('Prepare it again: SELECT dataenv.prepare_connection(%L);', workspace);
            END IF;
        ELSE
            val := dataenv.duckdb_s3_credentials(m[2]);
        END IF;
        script := pg_catalog.replace(script, '{{' || m[1] || ':' || m[2] || '}}', coalesce(val, 'PROVIDER credential_chain'));
    END LOOP;
    RETURN script;
END
$$;
COMMENT ON FUNCTION dataenv.duckdb_script(text) IS
    'Members of the workspace: DuckDB SQL to run first in a DuckDB session (CLI -init, Python execute, dbt-duckdb): secrets as the workspace''s managed role, then each lake attached under its name (the workspace''s own namespace, read-write) and every ancestor namespace its defer views read, READ_ONLY, under the aliases the views use. Holds the role''s password (and an S3 storage''s keys): keep it private. Refused to anyone else.';

CREATE OR REPLACE FUNCTION dataenv.duckdb_settings(workspace text) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fn constant text := 'dataenv.duckdb_settings';
    st jsonb;
    secrets jsonb := '[]'::jsonb;
    sec jsonb;
    pw text;
BEGIN
    PERFORM dataenv.require_workspace_user(fn, workspace);
    SELECT t.settings INTO st FROM dataenv.workspace_tool_scripts t WHERE t.workspace = duckdb_settings.workspace;
    IF st IS NULL THEN
        RAISE EXCEPTION '%: workspace % has no DuckDB settings yet', fn, to_json(workspace)::text
            USING ERRCODE = '55000', HINT = format('Prepare it: SELECT dataenv.prepare_connection(%L);', workspace);
    END IF;
    FOR sec IN SELECT e FROM pg_catalog.jsonb_array_elements(coalesce(st->'secrets', '[]'::jsonb)) e LOOP
        SELECT s.password INTO pw
          FROM dataenv.current_workspace_role(workspace, sec->>'cluster') r
          JOIN dataenv.workspace_role_secrets s ON s.cluster = r.cluster AND s.workspace = r.workspace;
        secrets := secrets || pg_catalog.jsonb_build_array(sec || pg_catalog.jsonb_build_object('password', pw));
    END LOOP;
    RETURN pg_catalog.jsonb_set(st, '{secrets}', secrets);
END
$$;
COMMENT ON FUNCTION dataenv.duckdb_settings(text) IS
    'Members of the workspace: what duckdb_script does, as JSON (extensions, postgres secrets with the role''s password, attaches with path and options, the database to use), for tools that take settings rather than SQL, such as a dbt-duckdb profile (dataenv connect --dbt-profile). Refused to anyone else.';

-- Requests.

CREATE OR REPLACE FUNCTION dataenv.validate_prepare_connection(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_request_keys('prepare_connection', args, ARRAY['workspace']);
    PERFORM dataenv.require_workspace_user('prepare_connection', args->>'workspace');
END
$$;
COMMENT ON FUNCTION dataenv.validate_prepare_connection(jsonb) IS 'Validates the args of a prepare_connection request.';

CREATE OR REPLACE FUNCTION dataenv.prepare_connection(workspace text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('prepare_connection', jsonb_build_object('workspace', workspace)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.prepare_connection(text) IS
    'Requests (members) that the workspace be ready for one''s own tools: its managed role on each cluster it uses, the privileges the application role holds on each datatable mirrored to it (run again after the schema changes), each lake''s namespace registered, bootstrapped and its defer views made, and the DuckDB script of dataenv.duckdb_script computed. create_fork does it for a new fork. Returns the request id.';

CREATE OR REPLACE FUNCTION dataenv.validate_rotate_credentials(args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM dataenv.check_request_keys('rotate_credentials', args, ARRAY['workspace']);
    PERFORM dataenv.require_workspace_user('rotate_credentials', args->>'workspace');
END
$$;
COMMENT ON FUNCTION dataenv.validate_rotate_credentials(jsonb) IS 'Validates the args of a rotate_credentials request.';

CREATE OR REPLACE FUNCTION dataenv.rotate_credentials(workspace text) RETURNS uuid
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO dataenv.requests (kind, args)
    VALUES ('rotate_credentials', jsonb_build_object('workspace', workspace)) RETURNING id
$$;
COMMENT ON FUNCTION dataenv.rotate_credentials(text) IS
    'Requests (the workspace''s owner) a new password for the workspace''s managed role on every cluster it has one on: the old one stops working once the request succeeds (sessions already open stay). connection_password and duckdb_script give the new one. Returns the request id.';

INSERT INTO dataenv.request_kinds (kind, validator, policy, workspace_arg, description) VALUES
    ('prepare_connection', 'dataenv.validate_prepare_connection(jsonb)'::regprocedure, 'workspace_member', 'workspace',
     'Makes a workspace usable from one''s own tools: its roles, their datatable grants, its lake namespaces and its DuckDB script.'),
    ('rotate_credentials', 'dataenv.validate_rotate_credentials(jsonb)'::regprocedure, 'workspace_owner', 'workspace',
     'Gives the workspace''s managed roles new passwords.')
ON CONFLICT (kind) DO UPDATE SET validator = EXCLUDED.validator, policy = EXCLUDED.policy,
                                 workspace_arg = EXCLUDED.workspace_arg, description = EXCLUDED.description;

-- A member who leaves a workspace knows its roles' passwords: revoking a membership (through
-- revoke_workspace or a plain DELETE, which only the owner may do) makes a rotate_credentials
-- request in the revoker's name when the workspace has roles. Not for a workspace being dropped.
CREATE OR REPLACE FUNCTION dataenv.workspace_has_roles(workspace text) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT FROM dataenv.workspace_roles r JOIN dataenv.workspaces w ON w.id = r.workspace
                    WHERE r.workspace = workspace_has_roles.workspace AND r.incarnation = w.created_at)
$$;
COMMENT ON FUNCTION dataenv.workspace_has_roles(text) IS
    'Internal: whether the workspace (which exists) has a managed role on some cluster.';

CREATE OR REPLACE FUNCTION dataenv.workspace_members_after_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF dataenv.workspace_has_roles(OLD.workspace) THEN
        -- In the revoker's name (the role the session acts as), authorized as its own request.
        INSERT INTO dataenv.requests (kind, args, requested_by)
        VALUES ('rotate_credentials', jsonb_build_object('workspace', OLD.workspace), dataenv.acting_role());
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION dataenv.workspace_members_after_delete() IS
    'Trigger: a revoked membership rotates the workspace''s passwords (a rotate_credentials request in the revoker''s name).';
DROP TRIGGER IF EXISTS workspace_members_after_delete ON dataenv.workspace_members;
CREATE TRIGGER workspace_members_after_delete AFTER DELETE ON dataenv.workspace_members
    FOR EACH ROW EXECUTE FUNCTION dataenv.workspace_members_after_delete();

REVOKE ALL ON FUNCTION dataenv.require_workspace_user(text, text), dataenv.duckdb_literal(text), dataenv.uri_encode(text),
    dataenv.libpq_uri(text, integer, text, text, text), dataenv.workspace_clusters(text),
    dataenv.current_workspace_role(text, text), dataenv.connection_info(text), dataenv.connection_password(text, text),
    dataenv.duckdb_s3_credentials(text), dataenv.duckdb_script(text), dataenv.duckdb_settings(text), dataenv.validate_prepare_connection(jsonb),
    dataenv.prepare_connection(text), dataenv.validate_rotate_credentials(jsonb), dataenv.rotate_credentials(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION dataenv.workspace_has_roles(text), dataenv.workspace_members_after_delete() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dataenv.connection_info(text), dataenv.connection_password(text, text), dataenv.duckdb_script(text),
    dataenv.duckdb_settings(text),
    dataenv.prepare_connection(text), dataenv.rotate_credentials(text), dataenv.libpq_uri(text, integer, text, text, text),
    dataenv.validate_prepare_connection(jsonb), dataenv.validate_rotate_credentials(jsonb),
    dataenv.require_workspace_user(text, text), dataenv.uri_encode(text)
  TO dataenv_user, dataenv_admin;
