// Package connection makes a workspace usable from its members' own tools (psql, applications,
// the DuckDB CLI, Python, dbt): the prepare_connection request gives the workspace's managed role
// on each cluster what its datatables grant and prepares its lakes (namespaces bootstrapped,
// defer views, the DuckDB script of dataenv.duckdb_script); rotate_credentials gives the roles
// new passwords. The SQL side (connection_info, connection_password, duckdb_script) is
// sqlapi/029_workspace_roles.sql. Nothing here returns or logs a password.
package connection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/job"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Request kinds.
const (
	KindPrepare = "prepare_connection"
	KindRotate  = "rotate_credentials"
)

// Lakes prepares a workspace's lakes for its members' DuckDB sessions (job.Handlers).
type Lakes interface {
	PrepareTools(ctx context.Context, workspace string, rep request.Reporter) (*job.ToolsReport, error)
}

// Service performs prepare_connection and rotate_credentials.
type Service struct {
	Control *pgxpool.Pool
	// WorkspaceLocks are the sessions workspace locks are held on.
	WorkspaceLocks *lock.WorkspaceSessions
	Clusters       *cluster.Admin
	Lakes          Lakes
	Logger         *slog.Logger
}

// Register registers the kinds' handlers.
func (s *Service) Register(reg *request.Registry) {
	reg.Register(KindPrepare, request.HandlerFunc(s.handlePrepare))
	reg.Register(KindRotate, request.HandlerFunc(s.handleRotate))
}

type args struct {
	Workspace string `json:"workspace"`
}

// Datatable is one datatable's state in a Result.
type Datatable struct {
	Datatable string `json:"datatable"`
	Cluster   string `json:"cluster"`
	Database  string `json:"database"`
	Role      string `json:"role,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Result is the result of prepare_connection (and of the preparation create_fork does).
type Result struct {
	Workspace  string            `json:"workspace"`
	Datatables []Datatable       `json:"datatables"`
	Roles      map[string]string `json:"roles"` // cluster -> role
	Lakes      *job.ToolsReport  `json:"lakes,omitempty"`
}

func (s *Service) handlePrepare(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var a args
	if err := request.DecodeArgs(req, &a); err != nil {
		return nil, err
	}
	// Under the workspace's lock: a drop_fork of the workspace running meanwhile would drop its
	// roles and namespaces while this makes them again.
	locks, err := s.WorkspaceLocks.Workspace(ctx, a.Workspace)
	if err != nil {
		return nil, request.Retryable(err)
	}
	defer locks.Close(ctx)
	return s.Prepare(ctx, a.Workspace, rep, true)
}

// datatablesSQL lists workspace $1's datatables and, for each that is the workspace's own fork
// copy, ready (made, owned and finished by its create_fork), the role its finish made it owned by
// (its report's owner; ” for none or an older report without one).
const datatablesSQL = `
SELECT r.datatable, r.cluster, r.database,
       (SELECT coalesce(c.report->>'owner', '') FROM dataenv.fork_copies c
         WHERE c.workspace = r.workspace AND c.cluster = r.cluster AND c.database = r.database AND c.state = 'ready')
  FROM dataenv.datatable_resolution_all r WHERE r.workspace = $1 ORDER BY r.datatable`

const clustersSQL = `
SELECT DISTINCT catalog_cluster FROM dataenv.lakes WHERE workspace = $1 ORDER BY 1`

// Prepare gives workspace's role on every cluster it uses the grants of its datatables
// (cluster.Locked.GrantDatatable) and prepares its lakes (Lakes.PrepareTools); the caller holds
// the workspace's lock (lock.Workspace). With strict, a
// datatable that cannot be granted fails the whole; without (create_fork), it is reported in
// the result and the step, and connection_info shows it not ready.
func (s *Service) Prepare(ctx context.Context, workspace string, rep request.Reporter, strict bool) (*Result, error) {
	return s.prepare(ctx, workspace, rep, strict, false)
}

// prepare is Prepare; with ownCopiesDone (create_fork, right after its commit), the workspace's
// own fork copies are not connected to: the fork made each one owned by its role and finished
// it to the parent's privileges, which is all GrantDatatable would find to do there, and it
// converged that role under the cluster's lifecycle lock before the copy was marked ready, so the
// role its report names is taken as it is (no second lock round, which would queue behind the
// schema template refresh the fork's commit just enqueued).
func (s *Service) prepare(ctx context.Context, workspace string, rep request.Reporter, strict, ownCopiesDone bool) (*Result, error) {
	if _, err := control.ReadWorkspace(ctx, s.Control, workspace); err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return nil, request.Refusef("no workspace named %q", workspace)
		}
		return nil, request.Retryable(err)
	}
	rows, err := s.Control.Query(ctx, datatablesSQL, workspace)
	if err != nil {
		return nil, request.Retryable(fmt.Errorf("read the datatables of %q: %w", workspace, err))
	}
	type listed struct {
		d Datatable
		// owner: the datatable is the workspace's own ready fork copy, owned by this role (nil:
		// not one; "": one whose report names no owner).
		owner *string
	}
	dts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listed, error) {
		var l listed
		return l, r.Scan(&l.d.Datatable, &l.d.Cluster, &l.d.Database, &l.owner)
	})
	if err != nil {
		return nil, request.Retryable(fmt.Errorf("read the datatables of %q: %w", workspace, err))
	}
	res := &Result{Workspace: workspace, Datatables: []Datatable{}, Roles: map[string]string{}}
	for _, l := range dts {
		d := l.d
		if ownCopiesDone && l.owner != nil {
			if d.Role = *l.owner; d.Role == "" {
				role, err := s.Clusters.EnsureWorkspaceRole(ctx, d.Cluster, workspace)
				if err != nil {
					return nil, fmt.Errorf("the role of workspace %q on cluster %q: %w", workspace, d.Cluster, err)
				}
				d.Role = role.Name
			}
			res.Roles[d.Cluster] = d.Role
			request.Reportf(ctx, rep, "datatable "+d.Datatable, "owned", "%s owns its copy %s on cluster %s", d.Role, d.Database, d.Cluster)
			res.Datatables = append(res.Datatables, d)
			continue
		}
		role, err := s.Clusters.GrantDatatableRole(ctx, d.Cluster, workspace, d.Database, rep)
		if err != nil {
			if strict || request.IsRetryable(err) {
				return nil, fmt.Errorf("datatable %q (database %q of cluster %q): %w", d.Datatable, d.Database, d.Cluster, err)
			}
			d.Error = err.Error()
			request.Report(ctx, rep, "datatable "+d.Datatable, "not granted", d.Error)
		} else {
			d.Role = role.Name
			res.Roles[d.Cluster] = role.Name
			request.Reportf(ctx, rep, "datatable "+d.Datatable, "granted", "%s on database %s of cluster %s", role.Name, d.Database, d.Cluster)
		}
		res.Datatables = append(res.Datatables, d)
	}
	rows, err = s.Control.Query(ctx, clustersSQL, workspace)
	if err != nil {
		return nil, request.Retryable(err)
	}
	clusters, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, request.Retryable(err)
	}
	for _, c := range clusters {
		role, err := s.Clusters.EnsureWorkspaceRole(ctx, c, workspace)
		if err != nil {
			return nil, fmt.Errorf("the role of workspace %q on cluster %q: %w", workspace, c, err)
		}
		res.Roles[c] = role.Name
	}
	if s.Lakes != nil {
		if res.Lakes, err = s.Lakes.PrepareTools(ctx, workspace, rep); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// RotateResult is the result of rotate_credentials: the roles that got a new password.
type RotateResult struct {
	Workspace string            `json:"workspace"`
	Rotated   map[string]string `json:"rotated"` // cluster -> role
}

const rolesSQL = `
SELECT r.cluster FROM dataenv.workspace_roles r JOIN dataenv.workspaces w ON w.id = r.workspace
 WHERE r.workspace = $1 AND r.incarnation = w.created_at ORDER BY 1`

func (s *Service) handleRotate(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var a args
	if err := request.DecodeArgs(req, &a); err != nil {
		return nil, err
	}
	rows, err := s.Control.Query(ctx, rolesSQL, a.Workspace)
	if err != nil {
		return nil, request.Retryable(err)
	}
	clusters, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, request.Retryable(err)
	}
	if len(clusters) == 0 {
		return nil, request.Refusef("workspace %q has no role yet: SELECT dataenv.prepare_connection(%q) makes them", a.Workspace, a.Workspace)
	}
	out := &RotateResult{Workspace: a.Workspace, Rotated: map[string]string{}}
	for _, c := range clusters {
		role, err := s.Clusters.RotateWorkspacePassword(ctx, c, a.Workspace, rep)
		if err != nil {
			return nil, fmt.Errorf("rotate the password of workspace %q on cluster %q: %w", a.Workspace, c, err)
		}
		out.Rotated[c] = role.Name
		request.Reportf(ctx, rep, "role "+role.Name, "rotated", "on cluster %s", c)
	}
	return out, nil
}

// PrepareFork is Prepare for create_fork (workspace.ForkPreparer): a datatable the role cannot be
// granted (a cluster not set up) is reported, not fatal; the lakes must be prepared.
func (s *Service) PrepareFork(ctx context.Context, fork string, rep request.Reporter) (any, error) {
	return s.prepare(ctx, fork, rep, false, true)
}
