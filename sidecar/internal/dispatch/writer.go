package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// outcome is a finished request waiting to be written.
type outcome struct {
	e        *entry
	status   request.Status
	result   []byte // JSON, nil for none
	errText  *string
	attempts int  // the attempt the compare-and-set expects
	claimed  bool // the request was moved to running first
	started  time.Time
	first    time.Time // first write try, for the visibility retry budget
	tries    int
}

// writer commits outcomes in batches: many rows, one statement, one commit (the NOTIFY trigger's
// commit-time lock is then taken once per batch, not once per request).
type writer struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	in       chan *outcome
	maxBatch int
	done     func(o *outcome, written bool)
}

// visibilityBudget is how long a 0-row compare-and-set is retried: a decoded insert can arrive
// before the row is visible to new snapshots (measured: about 1 in 1,000 outcomes under load).
const visibilityBudget = 3 * time.Second

func (w *writer) run(ctx context.Context) {
	for {
		var first *outcome
		select {
		case <-ctx.Done():
			return
		case first = <-w.in:
		}
		batch := []*outcome{first}
	drain:
		for len(batch) < w.maxBatch {
			select {
			case o := <-w.in:
				batch = append(batch, o)
			default:
				break drain
			}
		}
		w.write(ctx, batch)
	}
}

func (w *writer) write(ctx context.Context, batch []*outcome) {
	written, err := w.exec(ctx, batch)
	for backoff := 50 * time.Millisecond; err != nil; backoff = min(backoff*2, 5*time.Second) {
		if ctx.Err() != nil {
			return // leadership lost or shutting down: the next leader resumes these requests
		}
		w.log.Warn("writing request outcomes failed; retrying", "error", err, "requests", len(batch))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		written, err = w.exec(ctx, batch)
	}
	crashpoint.HitOnce("dispatch.after_outcome_commit")
	var missed []*outcome
	for _, o := range batch {
		if written[o.e.req.ID] {
			w.done(o, true)
			continue
		}
		missed = append(missed, o)
	}
	w.rewriteMissed(ctx, missed)
}

// rewriteMissed writes once more, at once, the outcomes whose rows were not visible to the
// batch's snapshot: the batch took long enough for most of them to become visible, and an
// immediate second statement (a new snapshot) is far cheaper than a timer and the next batch.
// What still matches nothing goes to retryInvisible.
func (w *writer) rewriteMissed(ctx context.Context, missed []*outcome) {
	if len(missed) == 0 {
		return
	}
	written, err := w.exec(ctx, missed)
	if err != nil {
		written = nil // the retry path below re-reads each row
	}
	for _, o := range missed {
		if written[o.e.req.ID] {
			w.done(o, true)
			continue
		}
		w.retryInvisible(ctx, o)
	}
}

func (w *writer) exec(ctx context.Context, batch []*outcome) (map[uuid.UUID]bool, error) {
	n := len(batch)
	ids, statuses, results := make([]uuid.UUID, n), make([]string, n), make([]*string, n)
	errs, attempts, claimed, started := make([]*string, n), make([]int32, n), make([]bool, n), make([]time.Time, n)
	for i, o := range batch {
		ids[i], statuses[i], errs[i] = o.e.req.ID, string(o.status), o.errText
		attempts[i], claimed[i], started[i] = int32(o.attempts), o.claimed, o.started
		if o.result != nil {
			s := string(o.result)
			results[i] = &s
		}
	}
	rows, err := w.pool.Query(ctx, outcomeSQL, ids, statuses, results, errs, attempts, claimed, started)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	written := make(map[uuid.UUID]bool, n)
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		written[id] = true
	}
	return written, rows.Err()
}

// retryInvisible handles a compare-and-set that matched no row: either the row is not visible
// yet (retry shortly, in a later batch) or a newer attempt or a cancellation owns it (stale: drop
// the outcome). The first retries skip the row read: invisibility lasts well under a millisecond.
func (w *writer) retryInvisible(ctx context.Context, o *outcome) {
	if o.first.IsZero() {
		o.first = time.Now()
	}
	o.tries++
	if o.tries > 3 {
		var status string
		var attempts int
		var cancelled bool
		err := w.pool.QueryRow(ctx, rowStateSQL, o.e.req.ID).Scan(&status, &attempts, &cancelled)
		stale := err == nil && (request.Status(status).Finished() || attempts != o.attempts || (!o.claimed && cancelled))
		if stale || time.Since(o.first) > visibilityBudget {
			w.log.Info("dropping a stale outcome", "request", o.e.req.ID, "attempt", o.attempts, "row_status", status, "row_attempts", attempts)
			w.done(o, false)
			return
		}
	}
	delay := min(250*time.Microsecond<<min(o.tries, 9), 100*time.Millisecond)
	time.AfterFunc(delay, func() {
		select {
		case w.in <- o:
		case <-ctx.Done():
		}
	})
}
