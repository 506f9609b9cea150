package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Request kinds this package handles.
const (
	KindSetupCluster        = "setup_cluster"
	KindCreateDatabase      = "create_database"
	KindDropDatabase        = "drop_database"
	KindCreateDatatableRole = "create_datatable_role"
	KindDropDatatableRole   = "drop_datatable_role"
)

// Config configures an Admin.
type Config struct {
	// Control is the pool of the control database. Its role owns the dataenv schema (it reads
	// dataenv.cluster_secrets and bypasses row-level security). Lifecycle locks pin one of its
	// connections each while they are held. Required.
	Control *pgxpool.Pool
	// ControlDSN is the sidecar's DSN of the control database; the instance cluster is
	// administered through it. Required.
	ControlDSN string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Now defaults to time.Now (step timestamps).
	Now func() time.Time
}

// Admin administers the clusters registered in the control database.
type Admin struct {
	cfg Config
	log *slog.Logger

	// Workspace roles (workspacerole.go): the installation id, read once, and the roles
	// recently converged.
	instMu    sync.Mutex
	inst      string
	roleCache roleCache
	// Databases that passed CheckBindable lately (binding.go).
	bindable bindableCache
}

// New returns an Admin.
func New(cfg Config) (*Admin, error) {
	if cfg.Control == nil {
		return nil, errors.New("cluster.New: Config.Control is required")
	}
	if cfg.ControlDSN == "" {
		return nil, errors.New("cluster.New: Config.ControlDSN is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Admin{cfg: cfg, log: cfg.Logger.With("component", "cluster")}, nil
}

// Register registers the handlers of the cluster request kinds. They are admin-only: the kinds'
// policy in dataenv.request_kinds, which the registry's authorizer checks before every attempt.
func (a *Admin) Register(reg *request.Registry) {
	reg.Register(KindSetupCluster, request.HandlerFunc(a.handleSetup))
	reg.Register(KindCreateDatabase, request.HandlerFunc(a.handleCreateDatabase))
	reg.Register(KindDropDatabase, request.HandlerFunc(a.handleDropDatabase))
	reg.Register(KindCreateDatatableRole, request.HandlerFunc(a.handleCreateDatatableRole))
	reg.Register(KindDropDatatableRole, request.HandlerFunc(a.handleDropDatatableRole))
	reg.Register(KindCheckCluster, request.HandlerFunc(a.handleCheck))
}

// controlPassword is the control DSN's password, scrubbed from error texts.
func (a *Admin) controlPassword() string {
	if cfg, err := pgx.ParseConfig(a.cfg.ControlDSN); err == nil {
		return cfg.Password
	}
	return ""
}

// Locked is a cluster whose lifecycle lock is held: its configuration was read under the lock,
// and side effects done through it cannot interleave with another's. It is valid only inside the
// function given to WithLifecycleLock.
type Locked struct {
	admin   *Admin
	held    *lock.Held
	cluster *Cluster
	rep     request.Reporter
	attempt *fence.Attempt // the request attempt running under the lock (nil outside one)
	// session is a session to the maintenance database opened ahead by the section's caller
	// (UseSession), lent to the statements of the section that need one.
	session *Dial
}

// WithLifecycleLock runs fn holding cluster's lifecycle lock, with the configuration read under
// it. If the lock is busy, a step with status "waiting" is reported through rep (may be nil)
// before blocking. The lock is always released; errors are scrubbed of the cluster's secrets.
func (a *Admin) WithLifecycleLock(ctx context.Context, cluster string, rep request.Reporter,
	fn func(ctx context.Context, l *Locked) error) error {
	stepName := "lifecycle lock of cluster " + cluster
	waited := false
	var secrets []string
	var c *Cluster
	// The configuration is read in the try-lock's round trip (lock.Read).
	read := &lock.Read{SQL: readClusterSQL, Args: []any{cluster}, Scan: func(row pgx.Row) (err error) {
		c, err = scanCluster(row, cluster)
		return err
	}}
	err := lock.WithRead(ctx, a.cfg.Control, lock.ClassLifecycle, cluster, func() {
		waited = true
		request.Report(ctx, rep, stepName, "waiting", "another request holds the lifecycle lock of cluster "+cluster)
	}, read, func(ctx context.Context, held *lock.Held) error {
		a.cfg.Metrics.LockWait(held.Waited())
		if waited {
			request.Report(ctx, rep, stepName, "done", fmt.Sprintf("waited %s", held.Waited().Round(time.Millisecond)))
		}
		secrets = c.secrets()
		return fn(ctx, &Locked{admin: a, held: held, cluster: c, rep: rep, attempt: fence.FromContext(ctx)})
	})
	return scrub(err, append(secrets, a.controlPassword())...)
}

// Cluster is the configuration read under the lock (a copy).
func (l *Locked) Cluster() Cluster { return *l.cluster }

// Control is the control-database connection that holds the lock: run control-database work
// under the lock on it (it is pinned, so the holder never waits for a pooled connection).
func (l *Locked) Control() *pgx.Conn { return l.held.Conn() }

// Connect opens an admin connection to database of the cluster ("" for the maintenance
// database) with the configuration read under the lock. The caller closes it.
func (l *Locked) Connect(ctx context.Context, database string) (*pgx.Conn, error) {
	conn, err := l.admin.connect(ctx, l.cluster, database)
	if err != nil {
		return nil, err
	}
	if err := l.admin.fenceOn(ctx, l.cluster, conn, l.Control()); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// UseSession lends d, a session to the maintenance database opened ahead (ConnectAhead(ctx,
// "")) that the caller keeps for a later section, to the statements of this section that need
// such a session (maintenance): each would otherwise open one of its own, and on a small fork a
// new session (backend start, authentication) costs as much as the statements it runs. d stays
// the caller's: it is neither taken nor closed here.
func (l *Locked) UseSession(d *Dial) { l.session = d }

// maintenance is a session to the maintenance database for the section's own statements: the
// one lent by UseSession while its owner has not taken it, or a new one; release closes what
// it opened.
func (l *Locked) maintenance(ctx context.Context) (conn *pgx.Conn, release func(), err error) {
	if l.session != nil {
		if conn, err := l.session.Peek(); conn != nil || err != nil {
			return conn, func() {}, err
		}
	}
	if conn, err = l.Connect(ctx, ""); err != nil {
		return nil, nil, err
	}
	return conn, func() { _ = conn.Close(context.WithoutCancel(ctx)) }, nil
}

// Libpq returns the libpq environment of database of the cluster; see Libpq. The tools it runs
// carry the attempt's application_name; they are fenced by the attempt's first connection to
// the cluster, which must come first (Admin.Libpq makes sure of it).
func (l *Locked) Libpq(database string) (*Libpq, error) {
	return l.admin.libpq(l.cluster, database, appName(l.attempt))
}

// Connect opens an admin connection to database of cluster ("" for the maintenance database):
// TLS per the cluster's sslmode and root_certificate_pem, search_path pinned to pg_catalog,
// pg_temp. The configuration is read under the cluster's lifecycle lock, which is released before
// returning; the caller closes the connection.
func (a *Admin) Connect(ctx context.Context, cluster, database string) (*pgx.Conn, error) {
	var conn *pgx.Conn
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		var err error
		conn, err = l.Connect(ctx, database)
		return err
	})
	return conn, err
}
