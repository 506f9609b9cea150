package lake

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Registry is the registry of fork lake namespaces (dataenv.fork_lake_namespaces), the cleanup
// ledger: every physical location an isolated fork attaches is recorded before the job runs, and
// its metadata schema is created with the ownership marker. Registration is cached for a short
// time per location; the cache of a workspace is dropped whenever its rows are cleaned up, so a
// fork recreated under the same id registers again.
type Registry struct {
	pool     *pgxpool.Pool
	clusters Clusters
	ttl      time.Duration
	now      func() time.Time

	mu   sync.Mutex
	seen map[string]map[string]time.Time // workspace -> location -> registered at
}

// DefaultRegistryTTL is how long a registration is trusted without writing the row again.
const DefaultRegistryTTL = time.Minute

// NewRegistry returns a registry; ttl <= 0 uses DefaultRegistryTTL.
func NewRegistry(pool *pgxpool.Pool, clusters Clusters, ttl time.Duration) *Registry {
	if ttl <= 0 {
		ttl = DefaultRegistryTTL
	}
	return &Registry{pool: pool, clusters: clusters, ttl: ttl, now: time.Now, seen: map[string]map[string]time.Time{}}
}

// schemaMarker is the comment on a fork metadata schema dataenv created.
func schemaMarker(ns Namespace) string {
	return fmt.Sprintf("%s; lake fork namespace; workspace %s; lake %s", names.Marker, ns.Workspace, ns.Lake.Name)
}

const registerSQL = `
INSERT INTO dataenv.fork_lake_namespaces
    (workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url, data_path)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url, data_path)
DO UPDATE SET schema_dropped = false, last_attached_at = now(), last_error = NULL`

// Register records ns (an isolated fork's namespace) and makes sure its metadata schema exists
// with the marker. The row is written first, so a crash in between leaves nothing untracked.
func (r *Registry) Register(ctx context.Context, ns Namespace, rep request.Reporter) error {
	if !ns.Forked {
		return nil
	}
	loc := ns.Key()
	if r.cached(ns.Workspace, loc) {
		return nil
	}
	_, err := r.pool.Exec(ctx, registerSQL, ns.Workspace, ns.Lake.Name, ns.MetadataSchema, ns.Lake.CatalogCluster,
		ns.Lake.CatalogDatabase, ns.Storage.Name, ns.Storage.URL, ns.DataPrefix)
	if err != nil {
		return request.Retryable(fmt.Errorf("register the fork namespace of lake %q: %w", ns.Lake.Name, err))
	}
	err = r.clusters.WithLifecycleLock(ctx, ns.Lake.CatalogCluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		conn, err := l.Connect(ctx, ns.Lake.CatalogDatabase)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		oid, created, err := ensureSchema(ctx, conn, ns)
		if err != nil {
			return err
		}
		return r.recordOID(ctx, ns, oid, created)
	})
	if err != nil {
		return err
	}
	r.remember(ns.Workspace, loc)
	return nil
}

// ensureSchema creates the fork's metadata schema with the marker, or checks the marker of an
// existing one: a schema of that name that dataenv did not create is refused. It returns the
// schema's OID and whether it was created now.
func ensureSchema(ctx context.Context, conn *pgx.Conn, ns Namespace) (uint32, bool, error) {
	comment, exists, err := schemaComment(ctx, conn, ns.MetadataSchema)
	if err != nil {
		return 0, false, err
	}
	if exists {
		if !cluster.HasMarker(comment) {
			return 0, false, request.Refusef("schema %q exists in catalog database %q without dataenv's marker; refusing to use it as the fork namespace of lake %q",
				ns.MetadataSchema, ns.Lake.CatalogDatabase, ns.Lake.Name)
		}
		oid, err := schemaOID(ctx, conn, ns.MetadataSchema)
		return oid, false, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback(context.Background())
	id := pgx.Identifier{ns.MetadataSchema}.Sanitize()
	if _, err := tx.Exec(ctx, "CREATE SCHEMA "+id); err != nil {
		return 0, false, fmt.Errorf("create schema %s: %w", ns.MetadataSchema, err)
	}
	if _, err := tx.Exec(ctx, "COMMENT ON SCHEMA "+id+" IS "+Literal(schemaMarker(ns))); err != nil {
		return 0, false, fmt.Errorf("comment on schema %s: %w", ns.MetadataSchema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, err
	}
	oid, err := schemaOID(ctx, conn, ns.MetadataSchema)
	return oid, true, err
}

func schemaOID(ctx context.Context, conn *pgx.Conn, schema string) (uint32, error) {
	var oid uint32
	if err := conn.QueryRow(ctx, `SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1`, schema).Scan(&oid); err != nil {
		return 0, fmt.Errorf("read the OID of schema %s: %w", schema, err)
	}
	return oid, nil
}

// recordOIDSQL records the schema's OID: always for a schema created now ($10), else only when
// none is recorded, so a schema someone put in the place of dataenv's keeps the drop refusing.
const recordOIDSQL = `
UPDATE dataenv.fork_lake_namespaces SET schema_oid = $9
 WHERE workspace = $1 AND lake = $2 AND metadata_schema = $3 AND catalog_cluster = $4 AND catalog_database = $5
   AND storage = $6 AND storage_url = $7 AND data_path = $8 AND ($10 OR schema_oid IS NULL)`

func (r *Registry) recordOID(ctx context.Context, ns Namespace, oid uint32, created bool) error {
	_, err := r.pool.Exec(ctx, recordOIDSQL, ns.Workspace, ns.Lake.Name, ns.MetadataSchema, ns.Lake.CatalogCluster,
		ns.Lake.CatalogDatabase, ns.Storage.Name, ns.Storage.URL, ns.DataPrefix, oid, created)
	if err != nil {
		return request.Retryable(fmt.Errorf("record the schema of the fork namespace of lake %q: %w", ns.Lake.Name, err))
	}
	return nil
}

// schemaComment reads a schema's comment and whether it exists.
func schemaComment(ctx context.Context, conn *pgx.Conn, schema string) (comment string, exists bool, err error) {
	err = conn.QueryRow(ctx, `SELECT coalesce(pg_catalog.obj_description(oid, 'pg_namespace'), '') FROM pg_catalog.pg_namespace WHERE nspname = $1`,
		schema).Scan(&comment)
	if err == pgx.ErrNoRows {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read schema %s: %w", schema, err)
	}
	return comment, true, nil
}

func (r *Registry) cached(workspace, loc string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[workspace][loc]
	return ok && r.now().Sub(at) < r.ttl
}

func (r *Registry) remember(workspace, loc string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[workspace] == nil {
		r.seen[workspace] = map[string]time.Time{}
	}
	r.seen[workspace][loc] = r.now()
}

// Invalidate forgets the registrations of workspace.
func (r *Registry) Invalidate(workspace string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, workspace)
}
