// Package expiry is the leader's sweep that expires forks: every Interval it calls
// dataenv.file_fork_expirations (sqlapi/061_fork_expiry.sql), which files an ordinary drop_fork
// request for each expired fork that is not protected, has no child fork left (children go
// first) and has no pending or running drop_fork, and records it in dataenv.fork_expirations
// (the fork's members see it there and in dataenv.requests). The drop itself is the drop_fork
// handler's: it is authorized, recorded, retried and crash-safe like any other request, and it
// refuses a fork that was protected, or whose expiry was moved, since the drop was filed.
//
// Each filed drop is logged and counted (dataenv_fork_expirations_total).
package expiry

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultInterval is the period of the sweep when Config.Interval is zero.
const DefaultInterval = 30 * time.Second

// batch bounds the drops filed by one call (the sweep calls again while a call fills it).
const batch = 100

// Observer is told about each drop filed (metrics); may be nil.
type Observer interface {
	ForkExpired()
}

// Config of a Sweeper.
type Config struct {
	Pool     *pgxpool.Pool // control database (required)
	Interval time.Duration // between sweeps, default DefaultInterval
	Logger   *slog.Logger
	Observer Observer
}

// Sweeper files the drops of expired forks.
type Sweeper struct {
	cfg Config
}

// New returns a sweeper; Run runs it.
func New(cfg Config) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sweeper{cfg: cfg}
}

// Filed is one drop_fork request filed for an expired fork.
type Filed struct {
	Fork      string
	Request   uuid.UUID
	ExpiresAt time.Time
}

// Run sweeps every Interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("fork expiry sweep failed; trying again at the next interval", "error", err)
		}
	}
}

// Sweep files the drops of every fork expired now (in batches) and returns them.
func (s *Sweeper) Sweep(ctx context.Context) ([]Filed, error) {
	var all []Filed
	for {
		filed, err := s.fileBatch(ctx)
		all = append(all, filed...)
		if err != nil || len(filed) < batch {
			return all, err
		}
	}
}

func (s *Sweeper) fileBatch(ctx context.Context) ([]Filed, error) {
	rows, err := s.cfg.Pool.Query(ctx, `SELECT fork, request_id, expires_at FROM dataenv.file_fork_expirations($1)`, batch)
	if err != nil {
		return nil, err
	}
	filed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Filed, error) {
		var f Filed
		err := r.Scan(&f.Fork, &f.Request, &f.ExpiresAt)
		return f, err
	})
	if err != nil {
		return nil, err
	}
	for _, f := range filed {
		if s.cfg.Observer != nil {
			s.cfg.Observer.ForkExpired()
		}
		s.cfg.Logger.Info("fork expired: drop_fork filed", "fork", f.Fork, "request", f.Request, "expired_at", f.ExpiresAt)
	}
	return filed, nil
}
