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
	steps    []byte // held steps (reporter.Hold), a JSON array, nil for none
	errText  *string
	attempts int  // the attempt the compare-and-set expects
	claimed  bool // the request was moved to running first
	started  time.Time
	tries    int // writes that matched no row
}

// writer commits outcomes in batches: many rows, one statement, one commit (the NOTIFY trigger's
// commit-time lock is then taken once per batch, not once per request).
type writer struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	in       chan *outcome
	maxBatch int
	done     func(o *outcome, written bool)
	signals  *Signals
}

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
			w.signals.send(sigWritten, Event{Request: o.e.req.ID, Attempt: o.attempts, Status: o.status})
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
// What still matches nothing goes to recheck.
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
			w.signals.send(sigWritten, Event{Request: o.e.req.ID, Attempt: o.attempts, Status: o.status})
			w.done(o, true)
			continue
		}
		w.recheck(ctx, o)
	}
}

func (w *writer) exec(ctx context.Context, batch []*outcome) (map[uuid.UUID]bool, error) {
	n := len(batch)
	ids, statuses, results := make([]uuid.UUID, n), make([]string, n), make([]*string, n)
	errs, attempts, claimed, started := make([]*string, n), make([]int32, n), make([]bool, n), make([]time.Time, n)
	steps := make([]*string, n)
	for i, o := range batch {
		ids[i], statuses[i], errs[i] = o.e.req.ID, string(o.status), o.errText
		attempts[i], claimed[i], started[i] = int32(o.attempts), o.claimed, o.started
		results[i], steps[i] = jsonText(o.result), jsonText(o.steps)
	}
	rows, err := w.pool.Query(ctx, outcomeSQL, ids, statuses, results, errs, attempts, claimed, started, steps)
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

// jsonText is b as a jsonb parameter, nil (NULL) for none.
func jsonText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// recheck handles a compare-and-set that matched no row. A claimed request's row was visible
// (its claim committed before the handler ran), so no match means it moved on; a stateless
// request's row may not be visible yet. Only a row that provably moved on (finished, a newer
// attempt, a cancellation, deleted) drops the outcome; anything else is written again later,
// however long it takes (the request stays in flight, and its transaction unacknowledged). The
// first retries skip the row read: invisibility usually lasts well under a millisecond.
func (w *writer) recheck(ctx context.Context, o *outcome) {
	o.tries++
	if o.tries > 3 {
		st, err := readRow(ctx, w.pool, o.e)
		if err != nil && ctx.Err() != nil {
			return // leadership lost or shutting down: the next leader resumes the request
		}
		if err == nil && o.stale(st) {
			w.log.Info("dropping an outcome: the request moved on", "request", o.e.req.ID, "attempt", o.attempts,
				"row_status", st.status, "row_attempts", st.attempts, "row_visible", st.visible)
			w.signals.send(sigStale, Event{Request: o.e.req.ID, Attempt: o.attempts, Status: o.status})
			w.done(o, false)
			return
		}
	}
	delay := min(250*time.Microsecond<<min(o.tries, 12), time.Second)
	time.AfterFunc(delay, func() {
		select {
		case w.in <- o:
		case <-ctx.Done():
		}
	})
}

// stale reports whether st shows that o can never be written.
func (o *outcome) stale(st rowState) bool {
	switch {
	case st.gone, st.status.Finished(), st.visible && st.attempts != o.attempts:
		return true
	case !st.visible:
		return false // decoded, not visible yet
	case o.claimed:
		return st.status != request.Running
	default:
		return st.status != request.Pending || st.cancelled
	}
}
