package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/compare"
	"github.com/dataenv/dataenv/sidecar/internal/connection"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/daemon"
	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/job"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/satellite"
	"github.com/dataenv/dataenv/sidecar/internal/workspace"
)

// Run builds the sidecar from cfg and runs it until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	instance := uuid.New()
	pool, err := openPool(ctx, cfg.DSN, fence.SessionName(instance, fence.RoleControl))
	if err != nil {
		return err
	}
	defer pool.Close()
	wsLocks, err := lock.NewWorkspaceSessions(pool)
	if err != nil {
		return err
	}
	defer wsLocks.Close()
	reg := metrics.NewRegistry()
	m := metrics.New(reg)
	sats := satellite.New(satellite.Config{Control: pool, MaxConns: cfg.SatelliteConnections,
		IdleTimeout: cfg.SatelliteIdleTimeout, Logger: cfg.Logger,
		Kinds: map[string]request.Handler{"ping": pingHandler{}}})
	go sats.Run(ctx)
	kinds, jobs, err := buildKinds(pool, wsLocks, cfg, m, sats)
	if err != nil {
		return err
	}
	defer jobs.Close()
	go jobs.Prewarm(ctx)
	return daemon.Run(ctx, daemon.Config{DSN: cfg.DSN, Pool: pool, Instance: instance, HTTPAddr: cfg.HTTPAddr,
		HTTPListener: cfg.HTTPListener,
		Concurrency:  cfg.Concurrency, ShutdownGrace: cfg.ShutdownGrace, Logger: cfg.Logger,
		RescueInterval: cfg.RescueInterval, RescueAfter: cfg.RescueAfter, RetryWindow: cfg.RetryWindow,
		ForkExpiryInterval: cfg.ForkExpiryInterval,
		Registry:           kinds, Metrics: m, Gatherer: reg, RequestRetention: cfg.RequestRetention, RetentionSatellites: sats,
		JobKinds: []string{job.KindRun, job.KindMaterialize, job.KindPromote}, SchedulingKind: satellite.SchedulingKind, SchedulingOwner: satellite.SchedulingOwner, JobConcurrency: cfg.JobConcurrency,
		JobsPerUser: cfg.JobsPerUser, JobsPerWorkspace: cfg.JobsPerWorkspace, SatelliteStats: sats.Stats,
		// Envelopes wait for one of the satellite connections: twice as many workers keep them
		// busy (one envelope runs while the next waits) without holding control-plane workers.
		Remote: satellite.IsEnvelope, RemoteConcurrency: 2 * cfg.SatelliteConnections})
}

// openPool opens the control pool every component shares. Its sessions pin their settings
// (pgsession): the sidecar's role owns the dataenv schema, nothing it runs may resolve to an
// object another role created, and the control database's owner sets no default for them.
func openPool(ctx context.Context, dsn, appName string) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse control DSN: %w", err)
	}
	pgsession.Pin(pcfg.ConnConfig.RuntimeParams)
	pcfg.ConnConfig.RuntimeParams["application_name"] = appName
	pcfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open control pool: %w", err)
	}
	return pool, nil
}

// components are the shared parts every area is built from, each made once.
type components struct {
	Pool     *pgxpool.Pool
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	Clusters *cluster.Admin
	Lakes    *lake.Hooks
}

// buildKinds builds every area on one set of shared components and registers every request
// kind's handler: the one place that knows them all.
func buildKinds(pool *pgxpool.Pool, wsLocks *lock.WorkspaceSessions, cfg Config, m *metrics.Metrics, sats *satellite.Service) (*request.Registry, *job.Handlers, error) {
	log := cfg.Logger
	admin, err := cluster.New(cluster.Config{Control: pool, ControlDSN: pool.Config().ConnString(), Metrics: m, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	lakeRegistry := lake.NewRegistry(pool, admin, 0)
	lakeAccess := lake.NewAccess(pool, admin)
	resolver := &lake.Resolver{Control: pool, Clusters: boundClusters{admin}, Registry: lakeRegistry, Access: lakeAccess, Logger: log}
	lakeHooks := lake.NewHooks(pool, admin, lakeRegistry, log)
	lakeHooks.Metrics, lakeHooks.Access = m, lakeAccess
	jobs, err := job.New(job.Config{Control: pool, WorkspaceLocks: wsLocks, Resolver: resolver, Logger: log, Metrics: m, Limits: cfg.JobLimits,
		Isolation: cfg.JobIsolation, Runner: client.Config{RunnerPath: cfg.RunnerPath, Logger: log, CgroupParent: jobCgroup(cfg.JobCgroup, log),
			WarmSpares: cfg.JobWarmSpares, MountedSpareSets: mountSets(cfg.JobWarmSpareMountSets)}})
	if err != nil {
		return nil, nil, err
	}
	conns := &connection.Service{Control: pool, WorkspaceLocks: wsLocks, Clusters: admin, Lakes: jobs, Logger: log}
	comparer, err := compare.New(compare.Config{Control: pool, Clusters: admin, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	forks, err := workspace.New(workspace.Config{Control: pool, WorkspaceLocks: wsLocks, Clusters: admin, Metrics: m, Logger: log,
		Cleaners: []workspace.ForkCleaner{lakeHooks, admin}, BlocksCreate: lake.BlocksCreate,
		Tools: pgtool.NewFinder(cfg.PGToolsDirs), Preparer: conns, Pinner: jobs, LakeReset: lakeHooks})
	if err != nil {
		return nil, nil, err
	}
	// Every handler runs behind the kind's authorization policy (dataenv.authorize_request),
	// checked for the request's requested_by before each attempt.
	reg := request.NewRegistry(control.Authorizer{Q: pool})
	reg.Register("ping", pingHandler{})
	admin.Register(reg)
	lakeHooks.Register(reg)
	jobs.Register(reg)
	forks.Register(reg)
	conns.Register(reg)
	comparer.Register(reg)
	sats.Register(reg)
	for _, kind := range []string{job.KindRun, job.KindMaterialize, workspace.KindCreateFork, workspace.KindDropFork} {
		h, _ := reg.Lookup(kind) // behind the control's policy for the satellite's requester
		sats.Offer(kind, h)
	}
	if registerTestKinds != nil {
		registerTestKinds(reg, components{Pool: pool, Metrics: m, Logger: log, Clusters: admin, Lakes: lakeHooks})
	}
	return reg, jobs, nil
}

// jobCgroup is the memory cgroup runners get one of their own under ("" for none): the
// configured directory, or with "auto" the sidecar's own where the machine allows a child there.
func jobCgroup(setting string, log *slog.Logger) string {
	switch setting {
	case "off":
		return ""
	case "", "auto":
		dir, err := client.OwnMemoryCgroup()
		if err != nil {
			log.Info("DuckDB jobs: no memory cgroup of their own (their memory limit is DuckDB's memory_limit only)", "reason", err)
			return ""
		}
		return dir
	default:
		return setting
	}
}

// registerTestKinds is set only in binaries built with the dataenv_testhooks tag (testhooks.go).
var registerTestKinds func(reg *request.Registry, c components)

// mountSets is client.Config.MountedSpareSets for the sidecar's setting, where 0 disables.
func mountSets(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
