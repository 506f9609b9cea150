package cluster

import (
	"context"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// RotateWorkspacePassword gives workspace's role on the cluster a new password: saved as pending,
// set on the role (as a SCRAM verifier), promoted (EnsureWorkspaceRole's convergence, so a crash
// in between converges at the next use). The role must exist; the old password stops working
// (sessions already open stay).
func (l *Locked) RotateWorkspacePassword(ctx context.Context, workspace string) (*WorkspaceRole, error) {
	rec, err := l.workspaceRoleRecord(ctx, workspace)
	if err != nil {
		return nil, err
	}
	if !rec.exists {
		return nil, request.Refusef("workspace %q has no role on cluster %q", workspace, l.cluster.Name)
	}
	if err := l.saveWorkspacePassword(ctx, workspace, newPassword()); err != nil {
		return nil, err
	}
	l.admin.roleCache.forget(l.cluster.Name, workspace)
	role, _, err := l.ensureWorkspaceRole(ctx, workspace)
	return role, err
}

// RotateWorkspacePassword is Locked.RotateWorkspacePassword under cluster's lifecycle lock.
func (a *Admin) RotateWorkspacePassword(ctx context.Context, cluster, workspace string, rep request.Reporter) (*WorkspaceRole, error) {
	var role *WorkspaceRole
	err := a.WithLifecycleLock(ctx, cluster, rep, func(ctx context.Context, l *Locked) error {
		var err error
		role, err = l.RotateWorkspacePassword(ctx, workspace)
		return err
	})
	return role, err
}

// GrantDatatableRole is GrantDatatable (under cluster's lifecycle lock) returning the role.
func (a *Admin) GrantDatatableRole(ctx context.Context, cluster, workspace, database string, rep request.Reporter) (*WorkspaceRole, error) {
	var role *WorkspaceRole
	err := a.WithLifecycleLock(ctx, cluster, rep, func(ctx context.Context, l *Locked) error {
		var err error
		role, err = l.GrantDatatable(ctx, workspace, database)
		return err
	})
	return role, err
}
