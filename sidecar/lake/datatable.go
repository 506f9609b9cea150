package lake

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/request"
)

// DatatableResolver says which database a workspace's datatable is (the workspaces area owns
// datatables and their fork copies).
type DatatableResolver interface {
	ResolveDatatable(ctx context.Context, workspace, name string) (cluster, database string, err error)
}

// ErrNoDatatable is returned for a datatable the workspace does not have.
var ErrNoDatatable = errors.New("no such datatable")

// SQLDatatables resolves datatables in the control database: from the workspaces area's
// dataenv.datatable_resolution_all view (which walks the fork chain for keep_original datatables)
// when it is installed, else from dataenv.datatables (workspace, name, cluster, database).
type SQLDatatables struct{ Control *pgxpool.Pool }

const resolveDatatableSQL = `
SELECT CASE WHEN pg_catalog.to_regclass('dataenv.datatable_resolution_all') IS NULL THEN 'table' ELSE 'view' END`

// ResolveDatatable implements DatatableResolver.
func (d SQLDatatables) ResolveDatatable(ctx context.Context, workspace, name string) (string, string, error) {
	var how string
	if err := d.Control.QueryRow(ctx, resolveDatatableSQL).Scan(&how); err != nil {
		return "", "", err
	}
	q := `SELECT cluster, database FROM dataenv.datatables WHERE workspace = $1 AND name = $2`
	if how == "view" {
		q = `SELECT cluster, database FROM dataenv.datatable_resolution_all WHERE workspace = $1 AND datatable = $2`
	}
	var c, db string
	err := d.Control.QueryRow(ctx, q, workspace, name).Scan(&c, &db)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", ErrNoDatatable
	}
	return c, db, err
}

// datatableAttach resolves one ATTACH 'datatable://<name>' into a postgres attach of the
// datatable's database for the workspace (TLS settings of its cluster included).
func (res *resolution) datatableAttach(ctx context.Context, name string, a *Attach) (string, error) {
	if res.r.Datatables == nil {
		return "", request.Refusef("ATTACH %s: datatables are not available in this sidecar", Literal(a.Path))
	}
	c, db, err := res.r.Datatables.ResolveDatatable(ctx, res.ws.ID, name)
	if errors.Is(err, ErrNoDatatable) {
		return "", request.Refusef("ATTACH %s: workspace %q has no datatable named %q", Literal(a.Path), res.ws.ID, name)
	}
	if err != nil {
		return "", request.Retryable(fmt.Errorf("resolve datatable %q: %w", name, err))
	}
	cc, err := res.cats.Conn(ctx, c, db)
	if err != nil {
		return "", err
	}
	opts := append([]Option{{"TYPE", "postgres"}}, withoutOptions(a.Options, "TYPE", "SECRET")...)
	opts = append(opts, Option{"SECRET", Literal(cc.Secret)})
	return Render(a.IfNotExists, cc.Path, a.Alias, opts), nil
}
