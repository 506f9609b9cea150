// Package rescuer is the leader's safety net behind every other delivery path: a periodic sweep
// of dataenv.requests that hands the dispatcher every unfinished request no worker holds.
//
// Replication is the fast path and the start-up re-read covers a new leader, but an event can
// still be missed: a decoded insert whose claim gave up, a worker that lost its entry, a request
// a zombie leader claimed and then died with. Every Interval the rescuer reads
//
//   - pending requests created more than RescueAfter ago, and
//   - running requests not updated (claimed, a step reported) for RescueAfter,
//
// and offers each to the dispatcher, which admits it only if it is not in flight there. A
// rescued pending request is claimed as usual; a rescued running one is claimed with a new
// attempt, which fences the sessions of the attempt that no live worker holds (see
// sidecar/internal/fence). Each rescue is logged with its reason and counted
// (dataenv_requests_rescued_total{reason}); each sweep also reports the age of the oldest pending
// and running request (dataenv_oldest_unfinished_request_age_seconds{status}).
//
// The shape is river's internal/maintenance/job_rescuer.go: a Config with defaults, a loop on a
// ticker, one sweep per tick in batches, test signals instead of sleeps.
package rescuer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Defaults of Config.
const (
	DefaultInterval    = 2 * time.Second
	DefaultRescueAfter = 2 * time.Second
)

// Reasons of a rescue (the reason label of dataenv_requests_rescued_total).
const (
	ReasonPending = "pending" // pending past RescueAfter, not in flight: a missed wake-up
	ReasonRunning = "running" // running, its attempt held by no live worker
)

// Dispatcher admits a request read from the table unless it is in flight.
type Dispatcher interface {
	Rescue(req request.Request) bool
}

// Observer is told about rescues and ages (metrics); may be nil.
type Observer interface {
	RequestRescued(reason string)
	SetOldestUnfinished(pending, running time.Duration)
}

// Config of a Rescuer. Zero values take the documented defaults.
type Config struct {
	Pool        *pgxpool.Pool // control database (required)
	Dispatcher  Dispatcher    // required
	Interval    time.Duration // between sweeps, default DefaultInterval
	RescueAfter time.Duration // age past which a request no worker holds is rescued, default DefaultRescueAfter
	BatchSize   int           // rows per query, default 500
	Logger      *slog.Logger
	Observer    Observer
	Signals     *Signals // test hooks, nil in production
}

// Rescuer sweeps for unfinished requests no worker holds.
type Rescuer struct {
	cfg Config
}

// New returns a rescuer; Run runs it.
func New(cfg Config) *Rescuer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = DefaultRescueAfter
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Rescuer{cfg: cfg}
}

// Result is what one sweep did.
type Result struct {
	Rescued map[string]int // by reason
	Seen    int            // unfinished requests past RescueAfter (in flight or not)
}

// Run sweeps every Interval until ctx ends.
func (r *Rescuer) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := r.Sweep(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("rescuer sweep failed; trying again at the next interval", "error", err)
			}
			continue
		}
		r.cfg.Signals.send(res)
	}
}

// Sweep runs one sweep: the ages of the oldest unfinished requests, then every request past
// RescueAfter, in batches ordered by creation.
func (r *Rescuer) Sweep(ctx context.Context) (Result, error) {
	res := Result{Rescued: map[string]int{}}
	if err := r.observeAges(ctx); err != nil {
		return res, err
	}
	after := time.Time{}
	for {
		reqs, err := r.batch(ctx, after)
		if err != nil {
			return res, err
		}
		for _, q := range reqs {
			res.Seen++
			r.offer(q, &res)
			after = q.CreatedAt
		}
		if len(reqs) < r.cfg.BatchSize {
			return res, nil
		}
	}
}

func (r *Rescuer) offer(req request.Request, res *Result) {
	reason := ReasonPending
	if req.Status == request.Running {
		reason = ReasonRunning
	}
	if !r.cfg.Dispatcher.Rescue(req) {
		return
	}
	res.Rescued[reason]++
	if r.cfg.Observer != nil {
		r.cfg.Observer.RequestRescued(reason)
	}
	r.cfg.Logger.Warn("rescued a request no worker held", "request", req.ID, "kind", req.Kind, "reason", reason,
		"status", req.Status, "attempts", req.Attempts, "age", time.Since(req.CreatedAt).Round(time.Millisecond))
}

// stuckSQL pages through the unfinished requests past the threshold; created_at pages (ties at
// one timestamp are rare and only delay a rescue to the next sweep).
const stuckSQL = `
SELECT ` + dispatch.RequestColumns + `
  FROM dataenv.requests
 WHERE status IN ('pending', 'running') AND created_at > $2
   AND CASE WHEN status = 'pending' THEN created_at ELSE updated_at END < clock_timestamp() - $1::interval
 ORDER BY created_at, id
 LIMIT $3`

func (r *Rescuer) batch(ctx context.Context, after time.Time) ([]request.Request, error) {
	rows, err := r.cfg.Pool.Query(ctx, stuckSQL, r.cfg.RescueAfter, after, r.cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, dispatch.ScanRequest)
}

const agesSQL = `
SELECT coalesce(extract(epoch FROM clock_timestamp() - min(created_at) FILTER (WHERE status = 'pending')), 0)::float8,
       coalesce(extract(epoch FROM clock_timestamp() - min(created_at) FILTER (WHERE status = 'running')), 0)::float8
  FROM dataenv.requests WHERE status IN ('pending', 'running')`

func (r *Rescuer) observeAges(ctx context.Context) error {
	var pending, running float64
	if err := r.cfg.Pool.QueryRow(ctx, agesSQL).Scan(&pending, &running); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	}
	if r.cfg.Observer != nil {
		r.cfg.Observer.SetOldestUnfinished(seconds(pending), seconds(running))
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(max(s, 0) * float64(time.Second)) }

// Signals let tests wait for sweeps instead of sleeping; nil in production.
type Signals struct {
	Swept chan Result // after every successful sweep
}

// NewSignals returns buffered signals.
func NewSignals() *Signals { return &Signals{Swept: make(chan Result, 1024)} }

func (s *Signals) send(res Result) {
	if s == nil || s.Swept == nil {
		return
	}
	select {
	case s.Swept <- res:
	default:
	}
}
