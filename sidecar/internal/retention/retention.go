// Package retention prunes finished requests once they are older than the installation's
// retention: a leader-only service that deletes in small batches, each its own short statement
// that skips rows another session holds, with a pause between batches, so that it never blocks
// the request path (inserts, claims, outcome writes).
package retention

import (
	"context"
	"log/slog"
	"time"

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
	Pause  time.Duration
	Logger *slog.Logger
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

// Run prunes at once and then every Interval until ctx ends (the leader's work context).
func (p *Pruner) Run(ctx context.Context) {
	if p.cfg.Retention < 0 {
		return
	}
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if n, err := p.Prune(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("request retention: prune finished requests", "error", err, "deleted", n)
		} else if n > 0 {
			p.cfg.Logger.Info("request retention: finished requests pruned", "deleted", n, "retention", p.cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneSQL deletes one batch: the oldest finished requests past the retention that nobody holds
// (SKIP LOCKED: a row being written is left for the next pass). Their cancellation rows go with
// them (ON DELETE CASCADE). lock_timeout bounds the wait for anything else.
const pruneSQL = `
WITH doomed AS (
    SELECT id FROM dataenv.requests
     WHERE status IN ('succeeded', 'failed', 'cancelled')
       AND finished_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1)
     ORDER BY finished_at
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
DELETE FROM dataenv.requests r USING doomed WHERE r.id = doomed.id`

// Prune deletes every finished request past the retention, a batch at a time, and returns how
// many it deleted.
func (p *Pruner) Prune(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := p.batch(ctx)
		total += n
		if err != nil || n < int64(p.cfg.Batch) {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(p.cfg.Pause):
		}
	}
}

func (p *Pruner) batch(ctx context.Context) (int64, error) {
	tx, err := p.cfg.Pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, pruneSQL, p.cfg.Retention.Seconds(), p.cfg.Batch)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), tx.Commit(ctx)
}
