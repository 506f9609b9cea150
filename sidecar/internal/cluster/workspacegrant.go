package cluster

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// NoteWorkspaceDatabase records that workspace's role was granted something in database of the
// cluster (dataenv.workspace_role_databases): where DropWorkspaceRole revokes before the drop.
// Call it before granting.
func (l *Locked) NoteWorkspaceDatabase(ctx context.Context, workspace, database string) error {
	_, err := l.Control().Exec(ctx, `INSERT INTO dataenv.workspace_role_databases (cluster, workspace, database)
		VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, l.cluster.Name, workspace, database)
	if err != nil {
		return retryable(fmt.Errorf("record database %q for the role of workspace %q: %w", database, workspace, err))
	}
	return nil
}

// datatablePrivilegesSQL lists, in the database connected to, every privilege a workspace role
// may mirror from the application role ($1) and whether the workspace role ($2) holds it already
// (directly, through a membership or PUBLIC) or directly only. Schemas: USAGE; tables and
// partitioned tables: SELECT, INSERT, UPDATE, DELETE, TRUNCATE; views and foreign tables: SELECT,
// INSERT, UPDATE, DELETE; materialized views: SELECT; sequences: USAGE, SELECT, UPDATE. Never
// CREATE, ownership, TRIGGER or REFERENCES. System schemas, dataenv (a control installation) and
// dataenv_fork_* (lake fork namespaces) are left out.
const datatablePrivilegesSQL = `
WITH app AS (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1),
     ws  AS (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $2),
     nsp AS (SELECT n.oid, n.nspname, n.nspacl FROM pg_catalog.pg_namespace n
              WHERE n.nspname NOT IN ('information_schema', 'dataenv') AND n.nspname NOT LIKE 'pg\_%'
                AND n.nspname NOT LIKE 'dataenv\_fork\_%'),
     obj AS (
        SELECT 'SCHEMA' AS kind, n.oid, ''::text AS schema, n.nspname::text AS name, n.nspacl AS acl, p.priv
          FROM nsp n CROSS JOIN (VALUES ('USAGE')) p(priv)
        UNION ALL
        SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid, n.nspname::text, c.relname::text, c.relacl, p.priv
          FROM pg_catalog.pg_class c JOIN nsp n ON n.oid = c.relnamespace
          JOIN (VALUES ('r', 'SELECT'), ('r', 'INSERT'), ('r', 'UPDATE'), ('r', 'DELETE'), ('r', 'TRUNCATE'),
                       ('p', 'SELECT'), ('p', 'INSERT'), ('p', 'UPDATE'), ('p', 'DELETE'), ('p', 'TRUNCATE'),
                       ('v', 'SELECT'), ('v', 'INSERT'), ('v', 'UPDATE'), ('v', 'DELETE'),
                       ('f', 'SELECT'), ('f', 'INSERT'), ('f', 'UPDATE'), ('f', 'DELETE'),
                       ('m', 'SELECT'), ('S', 'USAGE'), ('S', 'SELECT'), ('S', 'UPDATE')) p(relkind, priv)
            ON p.relkind = c.relkind::text)
SELECT o.kind, o.schema, o.name, o.priv,
       CASE o.kind WHEN 'SCHEMA' THEN pg_catalog.has_schema_privilege(app.oid, o.oid, o.priv)
                   WHEN 'SEQUENCE' THEN pg_catalog.has_sequence_privilege(app.oid, o.oid, o.priv)
                   ELSE pg_catalog.has_table_privilege(app.oid, o.oid, o.priv) END AS app_has,
       CASE o.kind WHEN 'SCHEMA' THEN pg_catalog.has_schema_privilege(ws.oid, o.oid, o.priv)
                   WHEN 'SEQUENCE' THEN pg_catalog.has_sequence_privilege(ws.oid, o.oid, o.priv)
                   ELSE pg_catalog.has_table_privilege(ws.oid, o.oid, o.priv) END AS ws_has,
       EXISTS (SELECT FROM pg_catalog.aclexplode(o.acl) a WHERE a.grantee = ws.oid AND a.privilege_type = o.priv) AS ws_direct
  FROM obj o CROSS JOIN app CROSS JOIN ws
 ORDER BY o.kind, o.schema, o.name, o.priv`

// GrantDatatable gives workspace's role what a datatable in database grants: CONNECT on the
// database (unless PUBLIC has it) and, in it, the privileges the cluster's application role holds
// there, directly or through the datatable roles granted to it (see datatablePrivilegesSQL);
// privileges the workspace role holds directly and the application role no longer does are
// revoked. The admin must be able to grant them (it is a member of the application role, which
// owns the databases dataenv creates; on other databases it owns the objects, is a superuser or
// holds the privileges WITH GRANT OPTION). Refused for a database no binding may reach
// (CheckBindable: a template, a database holding a dataenv installation), and when the cluster
// has no application role (set it up first). In a database the role owns (its workspace's fork
// copy) nothing is granted or revoked.
func (l *Locked) GrantDatatable(ctx context.Context, workspace, database string) (*WorkspaceRole, error) {
	// One connection to the database serves the check and the grants.
	conn, err := l.connectChecked(ctx, database)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	role, err := l.EnsureWorkspaceRole(ctx, workspace)
	if err != nil {
		return nil, err
	}
	if err := l.NoteWorkspaceDatabase(ctx, workspace, database); err != nil {
		return nil, err
	}
	// The workspace's own fork copy (owned by its role, ../shared/DESIGN.md "Ownership in fork
	// copies"): the role owns what the parent's owners owned, and the copy's access list and
	// privileges are the parent's, mapped; there is nothing to mirror, and mirroring would revoke
	// the owner's own privileges.
	var owns bool
	if err := conn.QueryRow(ctx, `SELECT datdba = $1::bigint::oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()`,
		int64(role.OID)).Scan(&owns); err != nil {
		return nil, retryable(err)
	}
	if owns {
		return role, nil
	}
	var appExists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $1)`, l.cluster.AppRole).Scan(&appExists); err != nil {
		return nil, retryable(err)
	}
	if !appExists {
		return nil, request.Refusef("datatable database %q of cluster %q: the cluster's application role %q does not exist, and a workspace's role gets what it may do there; run SELECT dataenv.setup_cluster(%s)",
			database, l.cluster.Name, l.cluster.AppRole, quoteLiteral(l.cluster.Name))
	}
	stmts, err := datatableGrants(ctx, conn, l.cluster.AppRole, role.Name, database)
	if err != nil {
		return nil, err
	}
	if len(stmts) > 0 {
		if _, err := conn.Exec(ctx, strings.Join(stmts, ";\n")); err != nil {
			return nil, fmt.Errorf("grant workspace role %q its datatable privileges in %q: %w", role.Name, database, err)
		}
	}
	return role, nil
}

// datatableGrants computes the GRANT and REVOKE statements that bring role in line with app in
// the database conn is connected to.
func datatableGrants(ctx context.Context, conn *pgx.Conn, app, role, database string) ([]string, error) {
	var stmts []string
	var connect bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.has_database_privilege($1, pg_catalog.current_database(), 'CONNECT')`, role).Scan(&connect); err != nil {
		return nil, retryable(err)
	}
	if !connect {
		stmts = append(stmts, "GRANT CONNECT ON DATABASE "+ident(database)+" TO "+ident(role))
	}
	rows, err := conn.Query(ctx, datatablePrivilegesSQL, app, role)
	if err != nil {
		return nil, retryable(fmt.Errorf("read the privileges in database %q: %w", database, err))
	}
	type target struct{ kind, object string }
	grants, revokes, seen := map[target][]string{}, map[target][]string{}, map[target]bool{}
	var order []target
	for rows.Next() {
		var kind, schema, name, priv string
		var appHas, wsHas, wsDirect bool
		if err := rows.Scan(&kind, &schema, &name, &priv, &appHas, &wsHas, &wsDirect); err != nil {
			rows.Close()
			return nil, retryable(err)
		}
		t := target{kind, pgx.Identifier{schema, name}.Sanitize()}
		if kind == "SCHEMA" {
			t.object = ident(name)
		}
		if !seen[t] {
			seen[t] = true
			order = append(order, t)
		}
		switch {
		case appHas && !wsHas:
			grants[t] = append(grants[t], priv)
		case !appHas && wsDirect:
			revokes[t] = append(revokes[t], priv)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, retryable(fmt.Errorf("read the privileges in database %q: %w", database, err))
	}
	for _, t := range order {
		if p := grants[t]; len(p) > 0 {
			stmts = append(stmts, fmt.Sprintf("GRANT %s ON %s %s TO %s", strings.Join(p, ", "), t.kind, t.object, ident(role)))
		}
		if p := revokes[t]; len(p) > 0 {
			stmts = append(stmts, fmt.Sprintf("REVOKE %s ON %s %s FROM %s", strings.Join(p, ", "), t.kind, t.object, ident(role)))
		}
	}
	return stmts, nil
}

// GrantDatatable is Locked.GrantDatatable under cluster's lifecycle lock.
func (a *Admin) GrantDatatable(ctx context.Context, cluster, workspace, database string) error {
	return a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		_, err := l.GrantDatatable(ctx, workspace, database)
		return err
	})
}
