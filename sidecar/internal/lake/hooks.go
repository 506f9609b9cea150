package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/objectstore"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Hooks is the lake side of a fork's cleanup (workspace.ForkCleaner): CleanupFork runs in
// drop_fork, and in create_fork before a fork id whose previous incarnation left namespaces in
// the registry is created again. For every registry row of the fork it runs DROP SCHEMA ...
// CASCADE of the metadata schema (refused unless it has the fork prefix and dataenv's marker) in
// the registered catalog, then the delete of the data prefix (refused unless under
// __dataenv_forks/<segment>/) in the registered storage, then the row's delete. Rows that failed
// stay (schema_dropped records a finished schema phase) and the error (a *CleanupError) lists
// them: call it again to retry. Once no metadata schema is left, the fork's lake configuration
// rows and materialization records are removed. A workspace that exists is never cleaned (a live fork). A fork's lakes are stamped
// isolated or shared by a trigger on dataenv.workspaces (sqlapi), not here.
type Hooks struct {
	// Metrics may be nil: side effects (drop_schema, delete_prefix) and deleted objects.
	Metrics *metrics.Metrics
	// Access, when set, is the access convergence whose remembered grants ResetFork forgets for
	// the schemas it drops (the jobs' resolver's).
	Access *Access

	pool     *pgxpool.Pool
	clusters Clusters
	registry *Registry
	log      *slog.Logger
}

// NewHooks returns the fork hooks.
func NewHooks(pool *pgxpool.Pool, clusters Clusters, registry *Registry, log *slog.Logger) *Hooks {
	if log == nil {
		log = slog.Default()
	}
	return &Hooks{pool: pool, clusters: clusters, registry: registry, log: log.With("component", "lake")}
}

// CleanupReport says what a cleanup did, per registry row.
type CleanupReport struct {
	Namespaces []NamespaceCleanup `json:"namespaces"`
	// Complete is true when no registry row of the fork is left.
	Complete bool `json:"complete"`
}

// NamespaceCleanup is the cleanup of one registry row.
type NamespaceCleanup struct {
	Lake           string `json:"lake"`
	MetadataSchema string `json:"metadata_schema"`
	Catalog        string `json:"catalog"`
	Storage        string `json:"storage"`
	DataPrefix     string `json:"data_prefix"`
	SchemaDropped  bool   `json:"schema_dropped"`
	ObjectsDeleted int    `json:"objects_deleted"`
	Done           bool   `json:"done"`
	Error          string `json:"error,omitempty"`
	err            error  // the failure behind Error, whose kind (transient or final) CleanupError reports
}

// CleanupError is a cleanup that left rows behind.
type CleanupError struct {
	Fork   string
	Report *CleanupReport
	// SchemasLeft counts rows whose metadata schema is not dropped yet.
	SchemasLeft int
}

// Transient reports whether every namespace left behind failed with a transient fault (see
// request.IsTransient), so that another attempt of the drop can finish the cleanup without a
// person acting.
func (e *CleanupError) Transient() bool {
	for _, n := range e.Report.Namespaces {
		if !n.Done && !request.IsTransient(n.err) {
			return false
		}
	}
	return true
}

func (e *CleanupError) Error() string {
	var parts []string
	for _, n := range e.Report.Namespaces {
		if !n.Done {
			parts = append(parts, fmt.Sprintf("lake %s (schema %s in %s, data %s/%s): %s", n.Lake, n.MetadataSchema, n.Catalog,
				n.Storage, n.DataPrefix, n.Error))
		}
	}
	return fmt.Sprintf("lake cleanup of fork %q is incomplete (retry drop_fork): %s", e.Fork, strings.Join(parts, "; "))
}

// registryRow is one row of dataenv.fork_lake_namespaces.
type registryRow struct {
	Workspace, Lake, Schema, Cluster, Database, Storage, StorageURL, DataPath string
	SchemaDropped                                                             bool
	// SchemaOID is the metadata schema's OID when recorded (0: not yet).
	SchemaOID uint32
}

const registryRowsSQL = `
SELECT workspace, lake, metadata_schema, catalog_cluster, catalog_database, storage, storage_url, data_path, schema_dropped,
       coalesce(schema_oid, 0)
  FROM dataenv.fork_lake_namespaces WHERE workspace = $1
 ORDER BY lake, registered_at`

const registryKey = `workspace = $1 AND lake = $2 AND metadata_schema = $3 AND catalog_cluster = $4 AND catalog_database = $5
   AND storage = $6 AND storage_url = $7 AND data_path = $8`

func (r registryRow) key() []any {
	return []any{r.Workspace, r.Lake, r.Schema, r.Cluster, r.Database, r.Storage, r.StorageURL, r.DataPath}
}

func (h *Hooks) registryRows(ctx context.Context, fork string) ([]registryRow, error) {
	rows, err := h.pool.Query(ctx, registryRowsSQL, fork)
	if err != nil {
		return nil, request.Retryable(fmt.Errorf("read the fork lake registry: %w", err))
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryRow, error) {
		var x registryRow
		return x, r.Scan(&x.Workspace, &x.Lake, &x.Schema, &x.Cluster, &x.Database, &x.Storage, &x.StorageURL, &x.DataPath, &x.SchemaDropped, &x.SchemaOID)
	})
}

// CleanupFork implements workspace.ForkCleaner (see Hooks).
func (h *Hooks) CleanupFork(ctx context.Context, fork string, rep request.Reporter) error {
	_, err := h.Cleanup(ctx, fork, rep)
	return err
}

// BlocksCreate reports whether a CleanupFork error must stop the re-creation of the fork id: a
// metadata schema that could not be dropped does (a new fork would reattach stale tables); data
// files left behind alone do not (they are inert once the schema is gone, stay tracked, and the
// next cleanup of the same prefix sweeps them).
func BlocksCreate(err error) bool {
	var ce *CleanupError
	if errors.As(err, &ce) {
		return ce.SchemasLeft > 0
	}
	return err != nil
}

// Cleanup is CleanupFork with its report.
func (h *Hooks) Cleanup(ctx context.Context, fork string, rep request.Reporter) (*CleanupReport, error) {
	defer h.registry.Invalidate(fork)
	var live bool
	if err := h.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM dataenv.workspaces WHERE id = $1)`, fork).Scan(&live); err != nil {
		return nil, request.Retryable(err)
	}
	if live {
		request.Reportf(ctx, rep, "lake cleanup of "+fork, "unchanged", "workspace %s exists: a live fork is never cleaned", fork)
		return &CleanupReport{Namespaces: []NamespaceCleanup{}}, nil
	}
	rows, err := h.registryRows(ctx, fork)
	if err != nil {
		return nil, err
	}
	report := &CleanupReport{Namespaces: []NamespaceCleanup{}}
	left := 0
	schemasLeft := 0
	for _, row := range rows {
		nc := h.cleanupRow(ctx, row, rep)
		report.Namespaces = append(report.Namespaces, nc)
		if !nc.Done {
			left++
			if !nc.SchemaDropped {
				schemasLeft++
			}
		}
	}
	h.registry.Invalidate(fork)
	if schemasLeft == 0 {
		// No metadata of the fork is left: its lake rows and materialization records describe
		// nothing any more (data files still to delete stay tracked in the registry), and must
		// not pass to a workspace created later under the same id.
		if err := h.forget(ctx, fork); err != nil {
			return report, err
		}
	}
	if left > 0 {
		return report, &CleanupError{Fork: fork, Report: report, SchemasLeft: schemasLeft}
	}
	report.Complete = true
	return report, nil
}

// forget removes the lake configuration rows and the materialization records of a dropped fork.
func (h *Hooks) forget(ctx context.Context, fork string) error {
	if _, err := h.pool.Exec(ctx, `DELETE FROM dataenv.lakes WHERE workspace = $1 AND fork_behavior IS NOT NULL`, fork); err != nil {
		return request.Retryable(fmt.Errorf("remove the lake configuration of fork %q: %w", fork, err))
	}
	if _, err := h.pool.Exec(ctx, `DELETE FROM dataenv.materializations WHERE workspace = $1`, fork); err != nil {
		return request.Retryable(fmt.Errorf("remove the materialization records of fork %q: %w", fork, err))
	}
	return nil
}

// cleanupRow cleans one registry row: schema, then data, then the row.
func (h *Hooks) cleanupRow(ctx context.Context, row registryRow, rep request.Reporter) NamespaceCleanup {
	nc := NamespaceCleanup{Lake: row.Lake, MetadataSchema: row.Schema, Catalog: row.Cluster + "/" + row.Database,
		Storage: row.Storage, DataPrefix: row.DataPath, SchemaDropped: row.SchemaDropped}
	fail := func(err error) NamespaceCleanup {
		nc.Error, nc.err = err.Error(), err
		_, _ = h.pool.Exec(context.Background(), `UPDATE dataenv.fork_lake_namespaces SET last_error = $9 WHERE `+registryKey,
			append(row.key(), nc.Error)...)
		request.Reportf(ctx, rep, "lake "+row.Lake+" cleanup", "failed", "%s", nc.Error)
		return nc
	}
	if !row.SchemaDropped {
		if err := h.dropSchema(ctx, row, rep); err != nil {
			h.Metrics.SideEffect(metrics.OpDropLakeSchema, effectResult(err))
			return fail(err)
		}
		h.Metrics.SideEffect(metrics.OpDropLakeSchema, metrics.ResultDone)
		if _, err := h.pool.Exec(ctx, `UPDATE dataenv.fork_lake_namespaces SET schema_dropped = true WHERE `+registryKey, row.key()...); err != nil {
			return fail(err)
		}
		nc.SchemaDropped = true
		request.Reportf(ctx, rep, "lake "+row.Lake+" metadata schema", "dropped", "%s in %s", row.Schema, nc.Catalog)
		// The schema took its grants with it.
		if _, err := h.pool.Exec(ctx, `DELETE FROM dataenv.lake_namespace_access
			WHERE catalog_cluster = $1 AND catalog_database = $2 AND metadata_schema = $3`, row.Cluster, row.Database, row.Schema); err != nil {
			return fail(err)
		}
	}
	crashpoint.HitOnce("lake.cleanup.after_schema_drop")
	n, err := h.deleteData(ctx, row)
	nc.ObjectsDeleted = n
	h.Metrics.ObjectsDeleted(metrics.ResultDone, n)
	if err != nil {
		h.Metrics.SideEffect(metrics.OpDeleteForkPrefix, effectResult(err))
		return fail(err)
	}
	h.Metrics.SideEffect(metrics.OpDeleteForkPrefix, metrics.ResultDone)
	request.Reportf(ctx, rep, "lake "+row.Lake+" data", "deleted", "%d objects under %s/%s", n, row.StorageURL, row.DataPath)
	if _, err := h.pool.Exec(ctx, `DELETE FROM dataenv.fork_lake_namespaces WHERE `+registryKey, row.key()...); err != nil {
		return fail(err)
	}
	nc.Done = true
	return nc
}

// dropSchema drops the registered metadata schema in the registered catalog, under the catalog
// cluster's lifecycle lock. Refused unless the name has the fork prefix, the schema carries
// dataenv's marker and has the OID recorded when dataenv made it; a schema already gone is done.
func (h *Hooks) dropSchema(ctx context.Context, row registryRow, rep request.Reporter) error {
	if !strings.HasPrefix(row.Schema, names.ForkPrefix) || row.Schema != names.ForkLakeSchema(row.Workspace, row.Lake) {
		return request.Refusef("refusing to drop schema %q: not the fork metadata schema of lake %q of %q", row.Schema, row.Lake, row.Workspace)
	}
	return h.clusters.WithLifecycleLock(ctx, row.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		conn, err := l.Connect(ctx, row.Database)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		comment, exists, err := schemaComment(ctx, conn, row.Schema)
		if err != nil || !exists {
			return err
		}
		if !cluster.HasMarker(comment) {
			return request.Refusef("refusing to drop schema %q in %q: it lacks dataenv's marker", row.Schema, row.Database)
		}
		if row.SchemaOID != 0 {
			oid, err := schemaOID(ctx, conn, row.Schema)
			if err != nil {
				return err
			}
			if oid != row.SchemaOID {
				return request.Refusef("refusing to drop schema %q in %q: its OID is %d, not the %d dataenv recorded (the schema was replaced by someone else); drop it by hand if it is dataenv's, then run drop_fork again",
					row.Schema, row.Database, oid, row.SchemaOID)
			}
		}
		_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{row.Schema}.Sanitize()+" CASCADE")
		return err
	})
}

// deleteData deletes the registered data prefix from the registered storage (the url recorded
// at registration, with the storage's current credentials), guarded on the fork's prefix.
func (h *Hooks) deleteData(ctx context.Context, row registryRow) (int, error) {
	s, err := control.ReadStorage(ctx, h.pool, row.Storage)
	if err != nil {
		return 0, err
	}
	s.URL = row.StorageURL
	store, err := s.Open()
	if err != nil {
		return 0, err
	}
	return store.DeletePrefix(ctx, row.DataPath, names.ForkDataGuard(row.Workspace))
}

// effectResult is the metric result of a failed side effect: refused (a guard held) or failed.
func effectResult(err error) string {
	return metrics.EffectResult(false, err, errors.Is(err, objectstore.ErrGuard) || request.IsRefused(err))
}
