package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Copy is a row of the fork-copy registry (dataenv.fork_copies): a database create_fork made,
// or is making, for a workspace. The row is the cleanup ledger: it is written before the
// database is created and deleted only after the database was dropped.
type Copy struct {
	Cluster        string    `json:"cluster"`
	Database       string    `json:"database"`
	Workspace      string    `json:"workspace"`
	Datatable      string    `json:"datatable"`
	Mode           string    `json:"mode"`
	ParentDatabase string    `json:"parent_database"`
	Method         string    `json:"method,omitempty"`
	State          string    `json:"state"`
	Request        uuid.UUID `json:"request"`
	Report         *Fidelity `json:"report,omitempty"`
	// incarnation is the created_at the fork's workspace row is committed with (the create_fork
	// request's): the incarnation its workspace role is made for while the copies are made.
	incarnation time.Time
	// adopt: the copy may take its schema template's spare with the spare's role, which becomes
	// the workspace's role on the cluster (readPlanWithOwner prepared it; nil: the role exists).
	adopt *cluster.Adoption
	// maint is the admin's session to the cluster's maintenance database that creates the copy's
	// database, opened by readPlanWithOwner while the plan is read (nil: opened when needed).
	maint *cluster.Dial
}

// Copy states.
const (
	StateCreating = "creating"
	StateReady    = "ready"
	StateDropping = "dropping" // its database is being dropped (dropCopyLocked, dropTemplate); never used
)

const copyColumns = `cluster, database, workspace, datatable, mode, parent_database, coalesce(method, ''), state, created_by_request, report`

func scanCopy(row pgx.CollectableRow) (Copy, error) {
	var c Copy
	return c, row.Scan(&c.Cluster, &c.Database, &c.Workspace, &c.Datatable, &c.Mode, &c.ParentDatabase, &c.Method, &c.State, &c.Request, &c.Report)
}

// Copies lists the registered fork copies of workspace (a dropped workspace's leftovers too),
// ordered by cluster and database.
func Copies(ctx context.Context, q control.Querier, workspace string) ([]Copy, error) {
	rows, err := q.Query(ctx, `SELECT `+copyColumns+` FROM dataenv.fork_copies WHERE workspace = $1 ORDER BY cluster, database`, workspace)
	if err != nil {
		return nil, retryable(fmt.Errorf("read the fork copies of workspace %q: %w", workspace, err))
	}
	out, err := pgx.CollectRows(rows, scanCopy)
	if err != nil {
		return nil, retryable(fmt.Errorf("read the fork copies of workspace %q: %w", workspace, err))
	}
	return out, nil
}

// readCopy reads the registry row of (cluster, database); nil if there is none.
func readCopy(ctx context.Context, q control.Querier, cluster, database string) (*Copy, error) {
	rows, err := q.Query(ctx, `SELECT `+copyColumns+` FROM dataenv.fork_copies WHERE cluster = $1 AND database = $2`, cluster, database)
	if err != nil {
		return nil, retryable(fmt.Errorf("read the registry row of %q on cluster %q: %w", database, cluster, err))
	}
	c, err := pgx.CollectExactlyOneRow(rows, scanCopy)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, retryable(fmt.Errorf("read the registry row of %q on cluster %q: %w", database, cluster, err))
	}
	return &c, nil
}

// registerCopy writes the registry row of c (state creating), unless there is one.
func registerCopy(ctx context.Context, conn *pgx.Conn, c Copy) error {
	_, err := conn.Exec(ctx, `INSERT INTO dataenv.fork_copies (cluster, database, workspace, datatable, mode, parent_database, created_by_request)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (cluster, database) DO NOTHING`,
		c.Cluster, c.Database, c.Workspace, c.Datatable, c.Mode, c.ParentDatabase, c.Request)
	if err != nil {
		return retryable(fmt.Errorf("register fork copy %q on cluster %q: %w", c.Database, c.Cluster, err))
	}
	return nil
}

func unregisterCopy(ctx context.Context, conn *pgx.Conn, c Copy) error {
	_, err := conn.Exec(ctx, `DELETE FROM dataenv.fork_copies WHERE cluster = $1 AND database = $2 AND created_by_request = $3`,
		c.Cluster, c.Database, c.Request)
	if err != nil {
		return retryable(fmt.Errorf("remove the registry row of fork copy %q on cluster %q: %w", c.Database, c.Cluster, err))
	}
	return nil
}
