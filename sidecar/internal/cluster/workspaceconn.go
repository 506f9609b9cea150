package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
)

// workspaceApplicationName names the connections made as a workspace role outside a request;
// inside one they carry the attempt's application_name (fence.AppName), so a later attempt of
// the request ends them like its admin sessions.
const workspaceApplicationName = "dataenv-workspace"

// roleCacheTTL is how long a converged workspace role is trusted without checking it on the
// cluster again (the record, its OID and the workspace incarnation are read every time).
const roleCacheTTL = time.Minute

type workspaceRoleKey struct {
	cluster, hostPort, workspace string
	incarnation                  time.Time
	oid                          uint32
}

// roleCache remembers the roles converged recently and their passwords.
type roleCache struct {
	mu sync.Mutex
	m  map[workspaceRoleKey]cachedRole
}

type cachedRole struct {
	password string
	at       time.Time
}

func (c *roleCache) get(k workspaceRoleKey) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || time.Since(e.at) > roleCacheTTL {
		return "", false
	}
	return e.password, true
}

func (c *roleCache) put(k workspaceRoleKey, pw string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[workspaceRoleKey]cachedRole{}
	}
	c.m[k] = cachedRole{password: pw, at: time.Now()}
}

// forget drops every entry of workspace on cluster.
func (c *roleCache) forget(cluster, workspace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if k.cluster == cluster && k.workspace == workspace {
			delete(c.m, k)
		}
	}
}

// WorkspaceConnConfig is the configuration of a connection to database of the cluster as
// workspace's role (EnsureWorkspaceRole first): the cluster's TLS settings, search_path pinned,
// application_name the attempt's (dataenv-workspace outside a request). Inside a request the
// cluster is fenced first (earlier attempts' sessions, the workspace role's included, are ended
// before this one acts). It carries the role's password: never log it.
func (l *Locked) WorkspaceConnConfig(ctx context.Context, workspace, database string) (*pgx.ConnConfig, error) {
	if err := l.admin.fenceForLibpq(ctx, l); err != nil {
		return nil, err
	}
	role, pw, err := l.ensureWorkspaceRole(ctx, workspace)
	if err != nil {
		return nil, err
	}
	cfg, err := l.admin.connConfig(l.cluster, database)
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password = role.Name, pw
	cfg.RuntimeParams["application_name"] = fence.AppName(ctx, workspaceApplicationName)
	return cfg, nil
}

// ConnectWorkspace opens a connection to database as workspace's role; see WorkspaceConnConfig.
// The caller closes it.
func (l *Locked) ConnectWorkspace(ctx context.Context, workspace, database string) (*pgx.Conn, error) {
	cfg, err := l.WorkspaceConnConfig(ctx, workspace, database)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		err = fmt.Errorf("connect to database %q of cluster %q as %q: %w", cfg.Database, l.cluster.Name, cfg.User, scrub(err, cfg.Password))
		if retryableConnectError(err) {
			return nil, retryable(err)
		}
		return nil, err
	}
	return conn, nil
}

// WorkspaceLibpq is the libpq environment (see Libpq) of database of the cluster as workspace's
// role: what a DuckDB job's postgres secret or a libpq tool run for the workspace uses, named
// like WorkspaceConnConfig's connections and fenced first the same way. Close it.
func (l *Locked) WorkspaceLibpq(ctx context.Context, workspace, database string) (*Libpq, error) {
	_, lp, err := l.WorkspaceRoleLibpq(ctx, workspace, database)
	return lp, err
}

// WorkspaceRoleLibpq is WorkspaceLibpq that also returns the role it converged, for a caller
// that grants it something under the same hold of the lock.
func (l *Locked) WorkspaceRoleLibpq(ctx context.Context, workspace, database string) (*WorkspaceRole, *Libpq, error) {
	incarnation, rec, err := l.fencedWorkspaceAndRole(ctx, workspace)
	if err != nil {
		return nil, nil, err
	}
	role, pw, err := l.ensureWorkspaceRoleFrom(ctx, workspace, incarnation, rec)
	if err != nil {
		return nil, nil, err
	}
	lp, err := l.workspaceLibpq(ctx, role, pw, database)
	return role, lp, err
}

// WorkspaceLibpqAt is WorkspaceLibpq for the role of a workspace not committed yet (see
// EnsureWorkspaceRoleAt): what a fork copy's restore runs as.
func (l *Locked) WorkspaceLibpqAt(ctx context.Context, workspace string, incarnation time.Time, database string) (*Libpq, error) {
	if err := l.admin.fenceForLibpq(ctx, l); err != nil {
		return nil, err
	}
	role, pw, err := l.ensureWorkspaceRoleAt(ctx, workspace, incarnation)
	if err != nil {
		return nil, err
	}
	return l.workspaceLibpq(ctx, role, pw, database)
}

func (l *Locked) workspaceLibpq(ctx context.Context, role *WorkspaceRole, pw, database string) (*Libpq, error) {
	lp, err := l.admin.libpq(l.cluster, database, fence.AppName(ctx, workspaceApplicationName))
	if err != nil {
		return nil, err
	}
	for i, kv := range lp.Env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "PGUSER":
			lp.Env[i] = "PGUSER=" + role.Name
		case "PGPASSWORD":
			lp.Env[i] = "PGPASSWORD=" + pw
		}
	}
	lp.ScramClientKey, lp.ScramServerKey, _ = ScramKeys(pw)
	return lp, nil
}

// EnsureWorkspaceRole is Locked.EnsureWorkspaceRole under cluster's lifecycle lock.
func (a *Admin) EnsureWorkspaceRole(ctx context.Context, cluster, workspace string) (*WorkspaceRole, error) {
	var role *WorkspaceRole
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		var err error
		role, err = l.EnsureWorkspaceRole(ctx, workspace)
		return err
	})
	return role, err
}

// ConnectWorkspace is Locked.ConnectWorkspace; the lifecycle lock is held only while the role is
// converged and the configuration read.
func (a *Admin) ConnectWorkspace(ctx context.Context, cluster, workspace, database string) (*pgx.Conn, error) {
	var cfg *pgx.ConnConfig
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		var err error
		cfg, err = l.WorkspaceConnConfig(ctx, workspace, database)
		return err
	})
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		err = fmt.Errorf("connect to database %q of cluster %q as %q: %w", cfg.Database, cluster, cfg.User, scrub(err, cfg.Password))
		if retryableConnectError(err) {
			return nil, retryable(err)
		}
		return nil, err
	}
	return conn, nil
}

// WorkspaceLibpq is Locked.WorkspaceLibpq under cluster's lifecycle lock (released on return).
func (a *Admin) WorkspaceLibpq(ctx context.Context, cluster, workspace, database string) (*Libpq, error) {
	var lp *Libpq
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		var err error
		lp, err = l.WorkspaceLibpq(ctx, workspace, database)
		return err
	})
	return lp, err
}

// ForgetWorkspaceRoles empties the cache of converged workspace roles: the next use of each
// checks it on its cluster again.
func (a *Admin) ForgetWorkspaceRoles() {
	a.roleCache.mu.Lock()
	defer a.roleCache.mu.Unlock()
	a.roleCache.m = nil
}

// BoundWorkspaceLibpq is WorkspaceLibpq for a database reached through a workspace's binding (a
// datatable, a lake catalog) by a job: the database is checked with CheckBindableRecent first,
// under the same lock.
func (a *Admin) BoundWorkspaceLibpq(ctx context.Context, cluster, workspace, database string) (*Libpq, error) {
	var lp *Libpq
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		if err := l.CheckBindableRecent(ctx, database); err != nil {
			return err
		}
		var err error
		lp, err = l.WorkspaceLibpq(ctx, workspace, database)
		return err
	})
	return lp, err
}
