package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Request kinds this package handles.
const (
	KindCreateFork = "create_fork"
	KindDropFork   = "drop_fork"
)

// Crash points (sidecar/crashpoint) of the fork side effects.
const (
	CrashAfterCreateDatabase = "fork.after_create_database"          // copy database created, nothing loaded
	CrashAfterLoad           = "fork.after_load"                     // copy loaded, not yet marked ready
	CrashBeforeCommit        = "fork.before_commit"                  // copies ready, fork workspace not committed
	CrashAfterWorkspaceDrop  = "fork.after_workspace_drop"           // drop_fork: workspace row gone, copies not dropped
	CrashTemplateCreated     = "fork.template.after_create_database" // schema template database created, empty
	CrashTemplateLoaded      = "fork.template.after_load"            // schema template restored, not ready
	CrashTemplateDropped     = "fork.template.dropped"               // schema template's database dropped, its row still there
	// CrashFailBeforeCommit makes the first create_fork that reaches its commit fail there with a
	// transient error (crashpoint.FailOnce): its rollback runs and the request is retried.
	CrashFailBeforeCommit = "fork.fail_before_commit"
	// CrashFailRollbackRoleDrop makes the first role drop of a failed create_fork's rollback fail
	// with a transient error (crashpoint.FailOnce), instead of dying.
	CrashFailRollbackRoleDrop = "fork.rollback.fail_role_drop"
	// CrashFailAfterPlanHead makes the first schema_only plan read that handed its head over fail
	// with a transient error (crashpoint.FailOnce) before the rest is read: the copy's database,
	// made from the head meanwhile, is left to the fork's rollback.
	CrashFailAfterPlanHead = "fork.fail_after_plan_head"
)

// ForkCleaner is another area's cleanup of what it holds for a fork (the lake area: fork
// metadata schemas and data prefixes). drop_fork calls it after the workspace row is gone, and
// create_fork calls it before re-creating a fork id whose previous incarnation left something
// behind. It must be idempotent and keep its own ledger rows until their cleanup succeeded; an
// error fails the request, which the user retries.
type ForkCleaner interface {
	CleanupFork(ctx context.Context, workspace string, rep request.Reporter) error
}

// ForkPreparer readies a committed fork for use (see Config.Preparer); its result goes into the
// create_fork result as "prepared".
type ForkPreparer interface {
	PrepareFork(ctx context.Context, fork string, rep request.Reporter) (any, error)
}

// ForkPinner takes the first pins of a fork made with pin_lakes (see Config.Pinner); its result
// goes into the create_fork result as "pins".
type ForkPinner interface {
	PinFork(ctx context.Context, fork string, rep request.Reporter) (any, error)
}

// Config configures a Service.
type Config struct {
	// Control is the pool of the control database (the role that owns the dataenv schema).
	// Required.
	Control *pgxpool.Pool
	// WorkspaceLocks are the sessions workspace locks are held on. Required.
	WorkspaceLocks *lock.WorkspaceSessions
	// Clusters reaches the clusters (lifecycle lock, marked databases, libpq env). Required.
	Clusters *cluster.Admin
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Tools finds, per cluster, pg_dump, psql and pg_restore at least as new as its server
	// (default: pgtool.NewFinder(nil), the machine's /usr/lib/postgresql/N/bin and PATH).
	Tools *pgtool.Finder
	// Cleaners are other areas' fork cleanups (see ForkCleaner).
	Cleaners []ForkCleaner
	// Preparer, when set, runs once a fork is committed (and again when create_fork runs after
	// the commit): the connection area gives the fork's roles their grants and bootstraps its
	// lake namespaces, so the fork is usable from its members' tools as soon as create_fork
	// succeeds. An error fails the request (which may be retried: the fork stays).
	Preparer ForkPreparer
	// Pinner, when set, pins the lake reads of a fork made with pin_lakes once it is committed,
	// before the Preparer runs (so its defer views are made at the pins).
	Pinner ForkPinner
	// LakeReset, when set, is the lake area's part of reset_fork (see ForkResetter).
	LakeReset ForkResetter
	// BlocksCreate decides whether a cleaner's error on a previous incarnation's leftovers stops
	// create_fork (default: every error does). The lake area passes lake.BlocksCreate: data files
	// left behind alone do not block, a metadata schema that cannot be dropped does.
	BlocksCreate func(err error) bool
	// ProgressEvery is the interval between progress steps of a long copy (default 2s).
	ProgressEvery time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Service performs the create_fork and drop_fork requests.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Control == nil || cfg.WorkspaceLocks == nil {
		return nil, errors.New("workspace.New: Config.Control and Config.WorkspaceLocks are required")
	}
	if cfg.Clusters == nil {
		return nil, errors.New("workspace.New: Config.Clusters is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tools == nil {
		cfg.Tools = pgtool.NewFinder(nil)
	}
	if cfg.BlocksCreate == nil {
		cfg.BlocksCreate = func(err error) bool { return err != nil }
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "workspace")}, nil
}

// Register registers the handlers of create_fork and drop_fork.
func (s *Service) Register(reg *request.Registry) {
	reg.Register(KindCreateFork, request.HandlerFunc(s.handleCreateFork))
	reg.Register(KindDropFork, request.HandlerFunc(s.handleDropFork))
	reg.Register(KindRefreshSchemaTemplate, request.HandlerFunc(s.handleRefreshTemplate))
	reg.Register(KindResetFork, request.HandlerFunc(s.handleResetFork))
}

// Register builds a Service from cfg and registers its handlers in reg: the composition root's
// one call.
func Register(reg *request.Registry, cfg Config) error {
	s, err := New(cfg)
	if err != nil {
		return err
	}
	s.Register(reg)
	return nil
}

// Setup is a standalone alternative to Register (no other areas' cleaners): a Service over its
// own cluster.Admin, built from the pool's connection string, registered in reg.
func Setup(_ context.Context, pool *pgxpool.Pool, reg *request.Registry, m *metrics.Metrics) error {
	admin, err := cluster.New(cluster.Config{Control: pool, ControlDSN: pool.Config().ConnString(), Metrics: m})
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	s, err := New(Config{Control: pool, Clusters: admin, Metrics: m})
	if err != nil {
		return err
	}
	s.Register(reg)
	return nil
}

// count counts a side effect as done, unchanged, refused or failed.
func (s *Service) count(op string, changed bool, err error) {
	s.cfg.Metrics.SideEffect(op, metrics.EffectResult(changed, err, request.IsRefused(err)))
}
