// Package control is the one model of the control database's configuration as the sidecar reads
// it: workspaces and their fork chains, datatables and their resolution, lakes, storages and
// workspace membership. Every area (jobs, lakes, forks) reads them through here. Reads run as the
// sidecar's role, which owns the dataenv schema (it bypasses row-level security and may read the
// secrets tables); callers acting for a user check CanUse first.
package control

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Querier is what the reads need: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx of the control
// database.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
