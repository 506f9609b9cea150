package lake

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Access converges what a workspace's role may do in a lake namespace (a metadata schema of a
// catalog database): write (its own namespace, or the parent's for a shared fork) or read (an
// ancestor's it defers to). Under the catalog cluster's lifecycle lock, as the cluster's admin,
// with catalog queries only (nothing in the namespace is read or run):
//
//   - the workspace role exists (cluster.Locked.EnsureWorkspaceRole), the database is recorded
//     for it, and the access in dataenv.lake_namespace_access;
//   - a root lake's metadata schema other than public is created when missing, with dataenv's
//     marker (the role may not create schemas); a fork's is the Registry's;
//   - CONNECT on the database unless PUBLIC has it; USAGE on the schema, CREATE too for write;
//   - on every table of the schema: SELECT for read, SELECT, INSERT, UPDATE, DELETE for write;
//   - default privileges, for every role that writes the namespace, on the tables it will create:
//     the same DML to the other writers, SELECT to the readers (DuckLake creates tables as it goes,
//     such as inlined data tables).
//
// A workspace role gets nothing else in a catalog database: not another workspace's namespace,
// not the public schema unless public is its own lake's metadata schema. Converged accesses are
// remembered for a minute.
type Access struct {
	pool     *pgxpool.Pool
	clusters Clusters
	ttl      time.Duration

	mu   sync.Mutex
	seen map[string]time.Time
}

// NewAccess returns the access convergence of lake namespaces.
func NewAccess(pool *pgxpool.Pool, clusters Clusters) *Access {
	return &Access{pool: pool, clusters: clusters, ttl: DefaultRegistryTTL, seen: map[string]time.Time{}}
}

// Accesses.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// rootSchemaMarker is the comment of a root lake's metadata schema dataenv created.
func rootSchemaMarker(ns Namespace) string {
	return fmt.Sprintf("%s; lake metadata schema; workspace %s; lake %s", names.Marker, ns.Workspace, ns.Lake.Name)
}

// Grant converges access (AccessRead or AccessWrite) of workspace's role to ns. It reports
// whether the namespace's schema exists (a read of one that does not is nothing to grant).
func (a *Access) Grant(ctx context.Context, ns Namespace, workspace, access string, rep request.Reporter) (bool, error) {
	exists := false
	err := a.clusters.WithLifecycleLock(ctx, ns.Lake.CatalogCluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		var err error
		exists, err = a.grantHeld(ctx, l, ns, workspace, access)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lake %q: give workspace %q %s access to its catalog: %w", ns.Lake.Name, workspace, access, err)
	}
	return exists, nil
}

// GrantWithLibpq is Grant for the namespace a job attaches, with what the job's attach needs
// under the same hold of the lifecycle lock: the workspace role's libpq settings for the catalog
// (what cluster.Admin.BoundWorkspaceLibpq gives) and the catalog database checked bindable
// (CheckBindableRecent). The lock is taken, the cluster read and the role converged once for
// all three. Close the Libpq.
func (a *Access) GrantWithLibpq(ctx context.Context, ns Namespace, workspace, access string, rep request.Reporter) (*cluster.Libpq, error) {
	var lp *cluster.Libpq
	err := a.clusters.WithLifecycleLock(ctx, ns.Lake.CatalogCluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		role, libpq, err := l.WorkspaceRoleLibpq(ctx, workspace, ns.Lake.CatalogDatabase)
		if err != nil {
			return err
		}
		lp = libpq
		if _, err := a.grantTo(ctx, l, ns, role, access); err != nil {
			return err
		}
		return l.CheckBindableRecent(ctx, ns.Lake.CatalogDatabase)
	})
	if err != nil {
		lp.Close() // nil-safe
		return nil, fmt.Errorf("lake %q: give workspace %q %s access to its catalog: %w", ns.Lake.Name, workspace, access, err)
	}
	return lp, nil
}

// grantHeld is Grant with the catalog cluster's lifecycle lock held.
func (a *Access) grantHeld(ctx context.Context, l *cluster.Locked, ns Namespace, workspace, access string) (bool, error) {
	role, err := l.EnsureWorkspaceRole(ctx, workspace)
	if err != nil {
		return false, err
	}
	return a.grantTo(ctx, l, ns, role, access)
}

// grantTo is grantHeld for the workspace's role, converged already.
func (a *Access) grantTo(ctx context.Context, l *cluster.Locked, ns Namespace, role *cluster.WorkspaceRole, access string) (bool, error) {
	workspace := role.Workspace
	// The role's OID is in the key: a workspace created again has a new role to grant to.
	key := strings.Join([]string{ns.Key(), workspace, access, fmt.Sprint(role.OID)}, "\x00")
	if a.cached(key) {
		return true, nil
	}
	exists, err := a.grantLocked(ctx, l, ns, role, access)
	if err == nil && exists {
		a.remember(key)
	}
	return exists, err
}

func (a *Access) grantLocked(ctx context.Context, l *cluster.Locked, ns Namespace, role *cluster.WorkspaceRole, access string) (bool, error) {
	workspace := role.Workspace
	if err := l.CheckBindable(ctx, ns.Lake.CatalogDatabase); err != nil {
		return false, err
	}
	if err := l.NoteWorkspaceDatabase(ctx, workspace, ns.Lake.CatalogDatabase); err != nil {
		return false, err
	}
	conn, err := l.Connect(ctx, ns.Lake.CatalogDatabase)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	schema := ns.SchemaName()
	_, exists, err := schemaComment(ctx, conn, schema)
	if err != nil {
		return false, request.Retryable(err)
	}
	if !exists && access == AccessWrite && !ns.Forked {
		if err := createRootSchema(ctx, conn, ns); err != nil {
			return false, err
		}
		exists = true
	}
	if !exists {
		return false, nil
	}
	if err := recordAccess(ctx, l.Control(), ns, workspace, access); err != nil {
		return false, err
	}
	peers, err := namespacePeers(ctx, l.Control(), ns)
	if err != nil {
		return false, err
	}
	stmts, err := accessStatements(ctx, conn, ns, role.Name, access, peers)
	if err != nil {
		return false, err
	}
	if len(stmts) > 0 {
		if _, err := conn.Exec(ctx, strings.Join(stmts, ";\n")); err != nil {
			return false, fmt.Errorf("grant %s on schema %s to %s: %w", access, schema, role.Name, err)
		}
	}
	return true, nil
}

// createRootSchema creates a root lake's metadata schema with the marker.
func createRootSchema(ctx context.Context, conn *pgx.Conn, ns Namespace) error {
	id := pgx.Identifier{ns.SchemaName()}.Sanitize()
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+id); err != nil {
			return fmt.Errorf("create schema %s: %w", ns.SchemaName(), err)
		}
		_, err := tx.Exec(ctx, "COMMENT ON SCHEMA "+id+" IS "+Literal(rootSchemaMarker(ns)))
		return err
	})
}

const recordAccessSQL = `
INSERT INTO dataenv.lake_namespace_access (catalog_cluster, catalog_database, metadata_schema, workspace, access)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (catalog_cluster, catalog_database, metadata_schema, workspace)
DO UPDATE SET access = CASE WHEN EXCLUDED.access = 'write' THEN 'write' ELSE lake_namespace_access.access END`

func recordAccess(ctx context.Context, q *pgx.Conn, ns Namespace, workspace, access string) error {
	_, err := q.Exec(ctx, recordAccessSQL, ns.Lake.CatalogCluster, ns.Lake.CatalogDatabase, ns.SchemaName(), workspace, access)
	if err != nil {
		return request.Retryable(fmt.Errorf("record the %s access of workspace %q to lake %q: %w", access, workspace, ns.Lake.Name, err))
	}
	return nil
}

// peer is a role with access to a namespace.
type peer struct {
	Role   string
	Access string
}

const peersSQL = `
SELECT r.role, a.access
  FROM dataenv.lake_namespace_access a
  JOIN dataenv.workspace_roles r ON r.cluster = a.catalog_cluster AND r.workspace = a.workspace
 WHERE a.catalog_cluster = $1 AND a.catalog_database = $2 AND a.metadata_schema = $3 AND r.role_oid IS NOT NULL
 ORDER BY r.role`

func namespacePeers(ctx context.Context, q *pgx.Conn, ns Namespace) ([]peer, error) {
	rows, err := q.Query(ctx, peersSQL, ns.Lake.CatalogCluster, ns.Lake.CatalogDatabase, ns.SchemaName())
	if err != nil {
		return nil, request.Retryable(fmt.Errorf("read the roles of lake %q: %w", ns.Lake.Name, err))
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (peer, error) {
		var p peer
		return p, r.Scan(&p.Role, &p.Access)
	})
}

var tablePrivileges = map[string][]string{
	AccessRead:  {"SELECT"},
	AccessWrite: {"SELECT", "INSERT", "UPDATE", "DELETE"},
}

// schemaPrivilegeSQL: whether the role lacks CONNECT, USAGE, CREATE.
const schemaPrivilegeSQL = `
SELECT NOT pg_catalog.has_database_privilege($1, pg_catalog.current_database(), 'CONNECT'),
       NOT pg_catalog.has_schema_privilege($1, $2, 'USAGE'),
       NOT pg_catalog.has_schema_privilege($1, $2, 'CREATE')`

// missingTablePrivilegesSQL: the tables of the schema on which the role lacks one of the
// privileges, and which.
const missingTablePrivilegesSQL = `
SELECT c.relname::text, p.priv
  FROM pg_catalog.pg_class c CROSS JOIN unnest($3::text[]) p(priv)
 WHERE c.relnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $2)
   AND c.relkind IN ('r', 'p', 'v')
   AND NOT pg_catalog.has_table_privilege($1, c.oid, p.priv)
 ORDER BY 1, 2`

// defaultACLSQL: the default privileges on tables in the schema, per creating role and grantee.
const defaultACLSQL = `
SELECT pg_catalog.pg_get_userbyid(d.defaclrole)::text, pg_catalog.pg_get_userbyid(a.grantee)::text, a.privilege_type
  FROM pg_catalog.pg_default_acl d CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) a
 WHERE d.defaclnamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1) AND d.defaclobjtype = 'r'`

// accessStatements computes the GRANT and ALTER DEFAULT PRIVILEGES statements that give role
// access to the namespace, and the default privileges between its peers.
func accessStatements(ctx context.Context, conn *pgx.Conn, ns Namespace, role, access string, peers []peer) ([]string, error) {
	schema := ns.SchemaName()
	sid, rid := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{role}.Sanitize()
	var stmts []string
	var noConnect, noUsage, noCreate bool
	if err := conn.QueryRow(ctx, schemaPrivilegeSQL, role, schema).Scan(&noConnect, &noUsage, &noCreate); err != nil {
		return nil, request.Retryable(err)
	}
	if noConnect {
		stmts = append(stmts, "GRANT CONNECT ON DATABASE "+pgx.Identifier{ns.Lake.CatalogDatabase}.Sanitize()+" TO "+rid)
	}
	if noUsage {
		stmts = append(stmts, "GRANT USAGE ON SCHEMA "+sid+" TO "+rid)
	}
	if noCreate && access == AccessWrite {
		stmts = append(stmts, "GRANT CREATE ON SCHEMA "+sid+" TO "+rid)
	}
	rows, err := conn.Query(ctx, missingTablePrivilegesSQL, role, schema, tablePrivileges[access])
	if err != nil {
		return nil, request.Retryable(err)
	}
	missing := map[string][]string{}
	var tables []string
	for rows.Next() {
		var t, p string
		if err := rows.Scan(&t, &p); err != nil {
			rows.Close()
			return nil, request.Retryable(err)
		}
		if missing[t] == nil {
			tables = append(tables, t)
		}
		missing[t] = append(missing[t], p)
	}
	if err := rows.Err(); err != nil {
		return nil, request.Retryable(err)
	}
	for _, t := range tables {
		stmts = append(stmts, fmt.Sprintf("GRANT %s ON TABLE %s TO %s", strings.Join(missing[t], ", "), pgx.Identifier{schema, t}.Sanitize(), rid))
	}
	defaults, err := defaultStatements(ctx, conn, schema, peers)
	if err != nil {
		return nil, err
	}
	return append(stmts, defaults...), nil
}

// defaultStatements: for each writer of the namespace, the default privileges on the tables it
// creates that each other peer lacks.
func defaultStatements(ctx context.Context, conn *pgx.Conn, schema string, peers []peer) ([]string, error) {
	rows, err := conn.Query(ctx, defaultACLSQL, schema)
	if err != nil {
		return nil, request.Retryable(err)
	}
	have := map[[3]string]bool{}
	for rows.Next() {
		var k [3]string
		if err := rows.Scan(&k[0], &k[1], &k[2]); err != nil {
			rows.Close()
			return nil, request.Retryable(err)
		}
		have[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, request.Retryable(err)
	}
	var stmts []string
	for _, w := range peers {
		if w.Access != AccessWrite {
			continue
		}
		for _, r := range peers {
			if r.Role == w.Role {
				continue
			}
			var privs []string
			for _, p := range tablePrivileges[r.Access] {
				if !have[[3]string{w.Role, r.Role, p}] {
					privs = append(privs, p)
				}
			}
			if len(privs) > 0 {
				stmts = append(stmts, fmt.Sprintf("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA %s GRANT %s ON TABLES TO %s",
					pgx.Identifier{w.Role}.Sanitize(), pgx.Identifier{schema}.Sanitize(), strings.Join(privs, ", "), pgx.Identifier{r.Role}.Sanitize()))
			}
		}
	}
	return stmts, nil
}

func (a *Access) cached(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.seen[key]
	return ok && time.Since(at) < a.ttl
}

func (a *Access) remember(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen[key] = time.Now()
}

// ForgetSchema drops the remembered accesses to a metadata schema of a catalog database (the
// schema was dropped, and the one made again under its name has none of its grants).
func (a *Access) ForgetSchema(catalogCluster, catalogDatabase, schema string) {
	prefix := strings.Join([]string{catalogCluster, catalogDatabase, schema, ""}, "\x00")
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.seen {
		if strings.HasPrefix(k, prefix) {
			delete(a.seen, k)
		}
	}
}

// Forget drops every remembered access (after a cleanup, or in tests).
func (a *Access) Forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = map[string]time.Time{}
}

// grantAndConnect gives the workspace write access to ns, its own namespace, and returns how the
// job's DuckDB reaches ns's catalog database: with one hold of the catalog cluster's lifecycle
// lock when the resolution has no connection to that database yet.
func (res *resolution) grantAndConnect(ctx context.Context, ns Namespace) (catalogConn, error) {
	l := ns.Lake
	if res.cats.Has(l.CatalogCluster, l.CatalogDatabase) {
		if _, err := res.r.Access.Grant(ctx, ns, res.ws.ID, AccessWrite, res.rep); err != nil {
			return catalogConn{}, err
		}
		return res.cats.Conn(ctx, l.CatalogCluster, l.CatalogDatabase)
	}
	lp, err := res.r.Access.GrantWithLibpq(ctx, ns, res.ws.ID, AccessWrite, res.rep)
	if err != nil {
		return catalogConn{}, err
	}
	return res.cats.ConnWith(ctx, l.CatalogCluster, l.CatalogDatabase, lp), nil
}
