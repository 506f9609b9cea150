// Package retention prunes finished requests once they are older than the installation's
// retention: a leader-only service that deletes in small batches, each its own short statement
// that skips rows another session holds, with a pause between batches, so that it never blocks
// the request path (inserts, claims, outcome writes).
package retention

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Config.
const (
	DefaultRetention = 7 * 24 * time.Hour
	DefaultInterval  = 10 * time.Minute
	DefaultBatch     = 500
	DefaultPause     = 200 * time.Millisecond
)

// Config configures a Pruner; zero values take the defaults.
type Config struct {
	Pool *pgxpool.Pool // control database (required)
	// Retention is how long a finished request (succeeded, failed, cancelled) is kept after it
	// finished. Default DefaultRetention (7 days); negative keeps requests forever.
	Retention time.Duration
	// Interval between passes. Default 10 minutes.
	Interval time.Duration
	// Batch is how many requests one statement deletes at most. Default 500.
	Batch int
	// Pause between two batches of a pass. Default 200 ms.
	Pause time.Duration
	// Satellites, when set, prunes every registered satellite's finished requests after each
	// pass over the control's, with the same policy.
	Satellites Satellites
	Observer   Observer // nil: nothing counted
	Logger     *slog.Logger
}

// Satellites prunes the finished requests of the satellite installations this control serves
// (sidecar/internal/satellite), one satellite at a time; one it cannot reach or trust is logged
// and skipped, never the end of the pass. It returns how many requests it deleted.
type Satellites interface {
	PruneSatellites(ctx context.Context, p Policy) int64
}

// Observer counts pruned requests by installation kind (metrics.Metrics).
type Observer interface {
	RequestsPruned(installation string, n int64)
}

// Installation kinds of Observer.RequestsPruned.
const (
	InstallationControl   = "control"
	InstallationSatellite = "satellite"
)

// Policy is what a pass deletes and how fast, the same for the control and every satellite.
type Policy struct {
	Retention time.Duration
	Batch     int
	Pause     time.Duration
}

// Beginner is where a batch runs: the control pool, or a connection to a satellite.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Pruner deletes finished requests past the retention.
type Pruner struct{ cfg Config }

// New returns a Pruner.
func New(cfg Config) *Pruner {
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pruner{cfg: cfg}
}

func (p *Pruner) policy() Policy {
	return Policy{Retention: p.cfg.Retention, Batch: p.cfg.Batch, Pause: p.cfg.Pause}
}

// Run prunes at once and then every Interval until ctx ends (the leader's work context).
func (p *Pruner) Run(ctx context.Context) {
	if p.cfg.Retention < 0 {
		return
	}
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass prunes the control's finished requests, then the satellites', and returns how many of
// each it deleted (Run makes one every Interval).
func (p *Pruner) Pass(ctx context.Context) (control, satellites int64) {
	control, err := p.Prune(ctx)
	if err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("request retention: prune finished requests", "error", err, "deleted", control)
	} else if control > 0 {
		p.cfg.Logger.Info("request retention: finished requests pruned", "deleted", control, "retention", p.cfg.Retention)
	}
	p.observe(InstallationControl, control)
	if p.cfg.Satellites == nil || ctx.Err() != nil {
		return control, 0
	}
	satellites = p.cfg.Satellites.PruneSatellites(ctx, p.policy())
	if satellites > 0 {
		p.cfg.Logger.Info("request retention: satellites' finished requests pruned", "deleted", satellites, "retention", p.cfg.Retention)
	}
	p.observe(InstallationSatellite, satellites)
	return control, satellites
}

func (p *Pruner) observe(installation string, n int64) {
	if p.cfg.Observer != nil && n > 0 {
		p.cfg.Observer.RequestsPruned(installation, n)
	}
}

// pruneSQL deletes one batch: the oldest finished requests past the retention that nobody holds
// (SKIP LOCKED: a row being written is left for the next pass), except those of ids $3. Their cancellation rows go with
// them (ON DELETE CASCADE). lock_timeout bounds the wait for anything else.
const pruneSQL = `
WITH doomed AS (
    SELECT id FROM dataenv.requests
     WHERE status IN ('succeeded', 'failed', 'cancelled')
       AND finished_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1)
       AND id <> ALL ($3::text::uuid[])
     ORDER BY finished_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
DELETE FROM dataenv.requests r USING doomed WHERE r.id = doomed.id`

// Prune deletes every finished request of the control past the retention, a batch at a time,
// and returns how many it deleted.
func (p *Pruner) Prune(ctx context.Context) (int64, error) {
	pol := p.policy()
	return pol.Batches(ctx, func(ctx context.Context) (int64, error) { return pol.DeleteBatch(ctx, p.cfg.Pool, nil) })
}

// Batches calls one until it deletes fewer than p.Batch requests (or fails), pausing p.Pause
// between two calls, and returns how many were deleted in all.
func (p Policy) Batches(ctx context.Context, one func(context.Context) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := one(ctx)
		total += n
		if err != nil || n < int64(p.Batch) {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(p.Pause):
		}
	}
}

// DeleteBatch deletes one batch of finished requests past the retention from db's dataenv.requests,
// in a short transaction of its own, keeping the requests of ids keep.
func (p Policy) DeleteBatch(ctx context.Context, db Beginner, keep []uuid.UUID) (int64, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, pruneSQL, p.Retention.Seconds(), p.Batch, uuidArray(keep))
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), tx.Commit(ctx)
}

// uuidArray is ids as an array literal: a satellite connection sends parameters untyped
// (QueryExecModeExec), which a Go slice cannot be encoded as.
func uuidArray(ids []uuid.UUID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}
