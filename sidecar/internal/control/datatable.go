package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Resolution is where a datatable of a workspace lives.
type Resolution struct {
	Workspace string // the workspace asked about
	Datatable string
	// Mode is the workspace's own entry: configured, keep_original, schema_only or full_copy.
	Mode     string
	Cluster  string
	Database string
	// ResolvedFrom is the workspace whose entry supplied (Cluster, Database): the workspace
	// itself, or the ancestor a keep_original chain reached.
	ResolvedFrom string
	// Fallback: a keep_original chain stopped (the parent is gone or no longer has the
	// datatable) and the database recorded at fork time is used.
	Fallback bool
}

const resolutionSQL = `SELECT workspace, datatable, mode, cluster, database, resolved_from, fallback
	FROM dataenv.datatable_resolution_all WHERE workspace = $1`

// ResolveDatatable resolves datatable of workspace to its (cluster, database), walking the fork
// chain: a configured, schema_only or full_copy entry is its own database; a keep_original entry
// follows the parent's entry of the same name, recursively, and falls back to the database it
// recorded at fork time where the chain stops. ErrNotFound when the workspace has no such
// datatable.
func ResolveDatatable(ctx context.Context, q Querier, workspace, datatable string) (Resolution, error) {
	var r Resolution
	err := q.QueryRow(ctx, resolutionSQL+` AND datatable = $2`, workspace, datatable).
		Scan(&r.Workspace, &r.Datatable, &r.Mode, &r.Cluster, &r.Database, &r.ResolvedFrom, &r.Fallback)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("datatable %q of workspace %q: %w", datatable, workspace, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("resolve datatable %q of workspace %q: %w", datatable, workspace, err)
	}
	return r, nil
}

// Datatables resolves every datatable of workspace, ordered by name.
func Datatables(ctx context.Context, q Querier, workspace string) ([]Resolution, error) {
	rows, err := q.Query(ctx, resolutionSQL+` ORDER BY datatable`, workspace)
	if err != nil {
		return nil, fmt.Errorf("resolve the datatables of workspace %q: %w", workspace, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Resolution, error) {
		var r Resolution
		return r, row.Scan(&r.Workspace, &r.Datatable, &r.Mode, &r.Cluster, &r.Database, &r.ResolvedFrom, &r.Fallback)
	})
	if err != nil {
		return nil, fmt.Errorf("resolve the datatables of workspace %q: %w", workspace, err)
	}
	return out, nil
}
