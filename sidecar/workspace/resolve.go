package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Querier is what the resolution functions query: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx of
// the control database, as the role that owns the dataenv schema (the sidecar's).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Workspace is a row of dataenv.workspaces.
type Workspace struct {
	ID          string
	IsFork      bool
	Parent      string // "" for a root, and for an orphaned fork (IsFork && Parent == "")
	SharedLakes []string
	CreatedBy   string
	// CreatedByRequest is the create_fork request that made a fork ("" for a root).
	CreatedByRequest string
}

// Orphaned reports whether the workspace is a fork whose parent is gone.
func (w *Workspace) Orphaned() bool { return w.IsFork && w.Parent == "" }

const workspaceSQL = `SELECT id, is_fork, coalesce(parent, ''), shared_lakes, created_by::text,
	coalesce(created_by_request::text, '') FROM dataenv.workspaces WHERE id = $1`

// ReadWorkspace reads a workspace; ErrNotFound if there is none.
func ReadWorkspace(ctx context.Context, q Querier, id string) (*Workspace, error) {
	var w Workspace
	err := q.QueryRow(ctx, workspaceSQL, id).Scan(&w.ID, &w.IsFork, &w.Parent, &w.SharedLakes, &w.CreatedBy, &w.CreatedByRequest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("workspace %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, retryable(fmt.Errorf("read workspace %q: %w", id, err))
	}
	return &w, nil
}

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
// recorded at fork time where the chain stops. It does not check membership: callers acting for
// a role check CanUse first. ErrNotFound when the workspace has no such datatable.
func ResolveDatatable(ctx context.Context, q Querier, workspace, datatable string) (Resolution, error) {
	var r Resolution
	err := q.QueryRow(ctx, resolutionSQL+` AND datatable = $2`, workspace, datatable).
		Scan(&r.Workspace, &r.Datatable, &r.Mode, &r.Cluster, &r.Database, &r.ResolvedFrom, &r.Fallback)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("datatable %q of workspace %q: %w", datatable, workspace, ErrNotFound)
	}
	if err != nil {
		return r, retryable(fmt.Errorf("resolve datatable %q of workspace %q: %w", datatable, workspace, err))
	}
	return r, nil
}

// Datatables resolves every datatable of workspace, ordered by name.
func Datatables(ctx context.Context, q Querier, workspace string) ([]Resolution, error) {
	rows, err := q.Query(ctx, resolutionSQL+` ORDER BY datatable`, workspace)
	if err != nil {
		return nil, retryable(fmt.Errorf("resolve the datatables of workspace %q: %w", workspace, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Resolution, error) {
		var r Resolution
		return r, row.Scan(&r.Workspace, &r.Datatable, &r.Mode, &r.Cluster, &r.Database, &r.ResolvedFrom, &r.Fallback)
	})
	if err != nil {
		return nil, retryable(fmt.Errorf("resolve the datatables of workspace %q: %w", workspace, err))
	}
	return out, nil
}

// Link is one workspace of a fork chain.
type Link struct {
	Depth       int    // 0: the workspace itself, 1: its parent, ...
	Workspace   string // the ancestor at this depth
	IsFork      bool
	Orphaned    bool     // a fork whose parent is gone: the chain ends here
	SharedLakes []string // the lakes this ancestor shares with its own parent
}

// Chain returns workspace and its ancestors, nearest first, up to the root (or the last ancestor
// of an orphaned chain). ErrNotFound when the workspace does not exist.
func Chain(ctx context.Context, q Querier, workspace string) ([]Link, error) {
	rows, err := q.Query(ctx, `SELECT depth, ancestor, ancestor_is_fork, ancestor_orphaned, ancestor_shared_lakes
		FROM dataenv.workspace_chain_all WHERE workspace = $1 ORDER BY depth`, workspace)
	if err != nil {
		return nil, retryable(fmt.Errorf("fork chain of workspace %q: %w", workspace, err))
	}
	links, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Link, error) {
		var l Link
		return l, row.Scan(&l.Depth, &l.Workspace, &l.IsFork, &l.Orphaned, &l.SharedLakes)
	})
	if err != nil {
		return nil, retryable(fmt.Errorf("fork chain of workspace %q: %w", workspace, err))
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("workspace %q: %w", workspace, ErrNotFound)
	}
	return links, nil
}

const canUseSQL = `SELECT EXISTS (SELECT FROM pg_catalog.pg_roles u WHERE u.rolname = $2
	AND (pg_catalog.pg_has_role(u.oid, 'dataenv_admin', 'MEMBER')
	     OR EXISTS (SELECT FROM dataenv.workspace_members m JOIN pg_catalog.pg_roles r ON r.rolname = m.member
	                WHERE m.workspace = $1 AND pg_catalog.pg_has_role(u.oid, r.oid, 'MEMBER'))))`

// CanUse reports whether role may use workspace: it is (or is a member of) a member role of the
// workspace, or a member of dataenv_admin. This is the check request handlers make for the role
// that made the request (dataenv.can_use_workspace makes it for current_user in SQL).
func CanUse(ctx context.Context, q Querier, workspace, role string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, canUseSQL, workspace, role).Scan(&ok); err != nil {
		return false, retryable(fmt.Errorf("membership of %q in workspace %q: %w", role, workspace, err))
	}
	return ok, nil
}
