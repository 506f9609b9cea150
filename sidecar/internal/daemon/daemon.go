// Package daemon is the sidecar's runtime: the leader election, the replication stream, the
// dispatcher, the status heartbeat and the HTTP listener, run until the process is told to stop.
// It is handed its components by the composition root, sidecar/internal/app.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/httpserver"
	"github.com/dataenv/dataenv/sidecar/internal/leader"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/retention"
)

// Config of the sidecar's runtime. The composition root (sidecar/internal/app) builds what it
// needs; zero values take the documented defaults.
type Config struct {
	DSN  string        // control database (the role that ran install)
	Pool *pgxpool.Pool // control database pool, search_path pinned (required)
	// Instance identifies this process (its dataenv.sidecars row and the application_name of
	// every session it opens, see sidecar/internal/fence); default a new random id. The
	// composition root names the pool's sessions with it, so it passes the same id here.
	Instance      uuid.UUID
	HTTPAddr      string        // /metrics, /healthz, /readyz; default 127.0.0.1:9750; "-" disables
	HTTPListener  net.Listener  // bound already (dataenv dev); HTTPAddr is then only reported
	Concurrency   int           // parallel handlers, default 8
	ShutdownGrace time.Duration // SIGTERM: time for running handlers to finish, default 30s
	// RescueInterval is the period of the leader's rescuer sweep, default 2s; RescueAfter the age
	// past which an unfinished request no worker holds is rescued, default 2s.
	RescueInterval time.Duration
	RescueAfter    time.Duration
	// ForkExpiryInterval is the period of the leader's sweep that files the drops of expired
	// forks (sidecar/internal/expiry), default 30s.
	ForkExpiryInterval time.Duration
	// RetryWindow is how long a request hitting transient faults is retried before it fails,
	// default 30 minutes.
	RetryWindow time.Duration
	Logger      *slog.Logger
	Registry    *request.Registry   // every request kind's handler (required)
	Metrics     *metrics.Metrics    // required
	Gatherer    prometheus.Gatherer // served on /metrics (required)
	// RequestRetention keeps finished requests this long; default 7 days, negative forever.
	RequestRetention time.Duration
	// RetentionSatellites prunes the satellites' finished requests with the same retention
	// (satellite.Service); nil prunes the control database only.
	RetentionSatellites retention.Satellites
	// JobKinds run on job workers of their own (JobConcurrency, at most JobsPerUser per user
	// and JobsPerWorkspace per workspace), so control-plane kinds never wait behind jobs; see
	// dispatch.Config.
	JobKinds                                      []string
	SchedulingKind                                func(request.Request) string                   // dispatch.Config.SchedulingKind
	SchedulingOwner                               func(request.Request) (user, workspace string) // dispatch.Config.SchedulingOwner
	JobConcurrency, JobsPerUser, JobsPerWorkspace int
	Remote                                        func(request.Request) bool // dispatch.Config.Remote
	RemoteConcurrency                             int                        // dispatch.Config.RemoteConcurrency
	// SatelliteStats reports the connections to satellites open and in use, for the heartbeat
	// (dataenv.sidecar_status); nil reports none.
	SatelliteStats func() (open, inUse int)
}

func (c *Config) defaults() {
	if c.HTTPAddr == "" {
		c.HTTPAddr = "127.0.0.1:9750"
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Instance == uuid.Nil {
		c.Instance = uuid.New()
	}
}

// Sidecar is one sidecar process's state.
type Sidecar struct {
	cfg      Config
	id       uuid.UUID
	pool     *pgxpool.Pool
	leading  atomic.Bool
	ready    atomic.Bool
	lsn      atomic.Uint64
	lag      atomic.Int64 // time since the oldest decoded, not yet durable commit (ns)
	schemaOK atomic.Bool
}

// Run runs the sidecar until ctx ends (SIGTERM), then drains within the grace period.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	s := &Sidecar{cfg: cfg, id: cfg.Instance, pool: cfg.Pool}
	if err := s.checkSchema(ctx); err != nil {
		return err
	}
	cfg.Metrics.Init(cfg.Registry.Kinds()...)
	stopHTTP, err := s.startHTTP(ctx)
	if err != nil {
		return err
	}
	defer stopHTTP()
	// The row exists before this process can lead: a new leader's fence finds every instance
	// that ever opened a session (sidecar/internal/fence).
	s.beat(ctx)
	go s.heartbeat(ctx)
	return s.campaignLoop(ctx)
}

// checkSchema refuses to run against a database whose schema this binary does not match. A
// control database that cannot be reached yet (a server starting or restarting, a lost
// connection: request.IsTransient) is waited for with capped backoff: a sidecar that a
// supervisor starts while PostgreSQL restarts must come up when it is back, not exit.
func (s *Sidecar) checkSchema(ctx context.Context) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := s.readSchema(ctx)
		if err == nil || !request.IsTransient(err) || ctx.Err() != nil {
			return err
		}
		s.cfg.Logger.Warn("control database not reachable yet; retrying", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// readSchema reads the control database's schema version once and compares it with this binary's.
func (s *Sidecar) readSchema(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connect to control database: %w", err)
	}
	defer conn.Release()
	have, err := install.SchemaVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	want := install.LatestVersion()
	switch {
	case have == 0:
		return errors.New("dataenv is not installed in this database: run `dataenv install --dsn ...` first")
	case have != want:
		return fmt.Errorf("control database schema is version %d, this sidecar needs %d: run `dataenv install` with the matching binary", have, want)
	}
	s.schemaOK.Store(true)
	return nil
}

func (s *Sidecar) startHTTP(ctx context.Context) (func(), error) {
	if s.cfg.HTTPAddr == "-" {
		return func() {}, nil
	}
	srv := httpserver.New(httpserver.Config{Addr: s.cfg.HTTPAddr, Listener: s.cfg.HTTPListener,
		Gatherer: s.cfg.Gatherer, Ready: s.readiness, Logger: s.cfg.Logger})
	if err := srv.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the HTTP listener of /metrics, /healthz and /readyz: %w "+
			"(choose another address with --http-addr, or --http-addr - to disable it)", err)
	}
	return srv.Stop, nil
}

// readiness: a leader is ready once it streams; a standby once it reaches the control database
// (it would take over at once).
func (s *Sidecar) readiness(ctx context.Context) (httpserver.Readiness, error) {
	want := strconv.Itoa(install.LatestVersion())
	have := want
	if !s.schemaOK.Load() {
		have = "unknown"
	}
	r := httpserver.Readiness{Leader: s.leading.Load() && s.ready.Load(), SchemaVersion: have, WantSchemaVersion: want}
	if !s.leading.Load() {
		if err := s.pool.Ping(ctx); err != nil {
			r.Detail = "standby cannot reach the control database: " + err.Error()
		} else {
			r.StandbyReady = true
		}
	}
	return r, nil
}

// campaignLoop waits for leadership, leads until it is lost or ctx ends, and campaigns again.
func (s *Sidecar) campaignLoop(ctx context.Context) error {
	el := &leader.Elector{DSN: s.cfg.DSN, AppName: fence.SessionName(s.id, fence.RoleLeader), Logger: s.cfg.Logger}
	for {
		lease, err := el.Campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.leading.Store(true)
		s.cfg.Metrics.SetLeader(true)
		s.lead(ctx, lease, el.StepDownBound())
		s.leading.Store(false)
		s.ready.Store(false)
		s.cfg.Metrics.SetLeader(false)
		lease.Release(context.WithoutCancel(ctx))
		if ctx.Err() != nil {
			s.cfg.Logger.Info("sidecar stopped; leadership released")
			return nil
		}
	}
}

func pid() int { return os.Getpid() }

func hostname() string {
	h, _ := os.Hostname()
	return h
}
