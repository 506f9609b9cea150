package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned for a workspace or datatable that does not exist.
var ErrNotFound = errors.New("not found")

// Workspace is a row of dataenv.workspaces with its fork chain.
type Workspace struct {
	ID          string
	IsFork      bool
	Parent      string // "" for a root, and for an orphaned fork (IsFork && Parent == "")
	SharedLakes []string
	CreatedBy   string
	// CreatedByRequest is the create_fork request that made a fork ("" for a root).
	CreatedByRequest string
	// Ancestors, nearest first, up to the root or to where an orphaned chain stops.
	Ancestors []Ancestor
}

// Ancestor is one workspace above another in a fork chain.
type Ancestor struct {
	ID     string
	IsFork bool
}

// Orphaned reports whether the workspace is a fork whose parent is gone.
func (w *Workspace) Orphaned() bool { return w.IsFork && w.Parent == "" }

// chainCTE is workspace $1 and its ancestors, with their depth below it (parent is ON DELETE SET
// NULL, so a chain ends at a root or at an orphaned fork).
const chainCTE = `
WITH RECURSIVE chain(depth, id, parent) AS (
    SELECT 0, w.id, w.parent FROM dataenv.workspaces w WHERE w.id = $1
    UNION ALL
    SELECT c.depth + 1, w.id, w.parent
      FROM chain c JOIN dataenv.workspaces w ON w.id = c.parent
     WHERE c.depth < 100
)`

// workspaceSQL reads a workspace and its chain.
const workspaceSQL = chainCTE + `
SELECT w.id, w.is_fork, coalesce(w.parent, ''), w.shared_lakes, w.created_by::text,
       coalesce(w.created_by_request::text, '')
  FROM chain c JOIN dataenv.workspaces w ON w.id = c.id
 ORDER BY c.depth`

// ReadWorkspace reads workspace id and its ancestors; ErrNotFound if there is none.
func ReadWorkspace(ctx context.Context, q Querier, id string) (*Workspace, error) {
	rows, err := q.Query(ctx, workspaceSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read workspace %q: %w", id, err)
	}
	return collectWorkspace(rows, id)
}

// collectWorkspace reads workspaceSQL's rows.
func collectWorkspace(rows pgx.Rows, id string) (*Workspace, error) {
	chain, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Workspace, error) {
		var w Workspace
		return w, r.Scan(&w.ID, &w.IsFork, &w.Parent, &w.SharedLakes, &w.CreatedBy, &w.CreatedByRequest)
	})
	if err != nil {
		return nil, fmt.Errorf("read workspace %q: %w", id, err)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("workspace %q: %w", id, ErrNotFound)
	}
	ws := chain[0]
	for _, a := range chain[1:] {
		ws.Ancestors = append(ws.Ancestors, Ancestor{ID: a.ID, IsFork: a.IsFork})
	}
	return &ws, nil
}

// Access is what a role may do with a workspace (dataenv.workspace_access).
type Access string

// Access levels, from most to least.
const (
	AccessAdmin  Access = "admin"  // a dataenv administrator: every workspace
	AccessOwner  Access = "owner"  // the owner (creator); for a dropped workspace, its tombstone's owner
	AccessMember Access = "member" // a member role, or a member of one
	AccessNone   Access = ""
)

// CanUse reports whether the access allows using the workspace (forks, jobs, connection info).
func (a Access) CanUse() bool { return a != AccessNone }

// CanOwn reports whether the access allows administering it (drop, grant, revoke).
func (a Access) CanOwn() bool { return a == AccessAdmin || a == AccessOwner }

// WorkspaceAccess returns role's access to workspace, through dataenv.workspace_access: the one
// implementation the SQL API, the row-level security policies and dataenv.authorize_request use.
func WorkspaceAccess(ctx context.Context, q Querier, workspace, role string) (Access, error) {
	var a *string
	if err := q.QueryRow(ctx, `SELECT dataenv.workspace_access($1, $2)`, workspace, role).Scan(&a); err != nil {
		return AccessNone, fmt.Errorf("access of %q to workspace %q: %w", role, workspace, err)
	}
	if a == nil {
		return AccessNone, nil
	}
	return Access(*a), nil
}

// CanUse reports whether role may use workspace: it is (or is a member of) a member role of the
// workspace, its owner, or a dataenv administrator (WorkspaceAccess).
func CanUse(ctx context.Context, q Querier, workspace, role string) (bool, error) {
	a, err := WorkspaceAccess(ctx, q, workspace, role)
	return a.CanUse(), err
}
