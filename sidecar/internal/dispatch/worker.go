package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

var (
	errCancelledByUser = errors.New("cancelled by dataenv.cancel()")
	errStale           = errors.New("request is finished or owned by a newer attempt")
)

func (d *Dispatcher) worker(ctx context.Context) {
	defer d.wg.Done()
	for {
		e := d.next(ctx)
		if e == nil {
			return
		}
		d.process(ctx, e)
		d.mu.Lock()
		d.running--
		d.mu.Unlock()
	}
}

// next pops the oldest queued entry, or returns nil when stopping.
func (d *Dispatcher) next(ctx context.Context) *entry {
	for {
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			d.poke() // wake the next idle worker so it sees stopping too
			return nil
		}
		if len(d.queue) > 0 {
			e := d.queue[0]
			d.queue = d.queue[1:]
			d.running++
			more := len(d.queue) > 0
			d.mu.Unlock()
			if more {
				d.poke()
			}
			return e
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		}
	}
}

// process runs one request to its outcome: claim (unless stateless), handler, outcome.
func (d *Dispatcher) process(ctx context.Context, e *entry) {
	h, ok := d.cfg.Registry.Lookup(e.req.Kind)
	if !ok {
		d.finish(ctx, e, e.req.Attempts, false, request.Failed, nil,
			fmt.Errorf("this sidecar has no handler for request kind %q: upgrade the sidecar", e.req.Kind))
		return
	}
	st, _ := h.(request.Stateless)
	claimed := st == nil || !st.Stateless()
	attempt := e.req.Attempts
	if claimed {
		var err error
		if attempt, err = d.claim(ctx, e); err != nil {
			if errors.Is(err, errStale) && e.userStop.Load() {
				d.finishCancelledRunning(ctx, e)
				return
			}
			d.logClaimFailure(ctx, e, err)
			return
		}
		d.markDurable(e)
		crashpoint.HitOnce("dispatch.after_claim")
	}
	d.runHandler(ctx, e, h, attempt, claimed)
}

func (d *Dispatcher) logClaimFailure(ctx context.Context, e *entry, err error) {
	if errors.Is(err, errStale) {
		var status string
		var attempts int
		var cancelled bool
		_ = d.cfg.Pool.QueryRow(ctx, rowStateSQL, e.req.ID).Scan(&status, &attempts, &cancelled)
		d.cfg.Logger.Info("request already handled elsewhere; skipping it", "request", e.req.ID,
			"read_attempt", e.req.Attempts, "row_status", status, "row_attempts", attempts, "row_cancel_requested", cancelled)
		d.forget(e)
		return
	}
	if ctx.Err() == nil {
		d.cfg.Logger.Warn("claiming request failed; it is resumed at the next rescan", "request", e.req.ID, "error", err)
	}
	d.drop(e)
}

// finishCancelledRunning finishes a running request whose cancellation arrived while no handler
// ran (found by a rescan): the claim refuses cancelled rows, so the outcome is written directly.
func (d *Dispatcher) finishCancelledRunning(ctx context.Context, e *entry) {
	var status string
	var attempts int
	var cancelled bool
	if err := d.cfg.Pool.QueryRow(ctx, rowStateSQL, e.req.ID).Scan(&status, &attempts, &cancelled); err != nil || status != "running" {
		d.forget(e)
		return
	}
	d.finish(ctx, e, attempts, true, request.Cancelled, nil, errCancelledByUser)
}

func (d *Dispatcher) runHandler(ctx context.Context, e *entry, h request.Handler, attempt int, claimed bool) {
	for {
		hctx, cancel := context.WithCancelCause(ctx)
		d.mu.Lock()
		e.cancel = cancel
		d.mu.Unlock()
		if e.userStop.Load() {
			cancel(errCancelledByUser)
		}
		req := e.req
		req.Attempts, req.Status = attempt, request.Running
		started := d.cfg.Now()
		result, err := h.Handle(hctx, &req, &reporter{d: d, e: e, attempt: attempt})
		cancel(nil)
		switch {
		case e.userStop.Load() && err != nil:
			d.finishAt(ctx, e, attempt, claimed, request.Cancelled, nil, errCancelledByUser, started)
		case ctx.Err() != nil:
			d.drop(e) // shutdown or lost leadership: the next leader resumes it
		case err != nil && claimed && request.IsRetryable(err) && attempt < d.cfg.MaxAttempts:
			if attempt = d.retry(ctx, e, attempt, err); attempt == 0 {
				return
			}
			continue
		case err != nil:
			d.finishAt(ctx, e, attempt, claimed, request.Failed, nil, err, started)
		default:
			d.finishAt(ctx, e, attempt, claimed, request.Succeeded, result, nil, started)
		}
		return
	}
}

// retry waits a backoff, then takes a new attempt; 0 means the entry was dropped.
func (d *Dispatcher) retry(ctx context.Context, e *entry, attempt int, cause error) int {
	delay := min(time.Duration(1<<min(attempt, 6))*200*time.Millisecond, 30*time.Second)
	(&reporter{d: d, e: e, attempt: attempt}).Step(ctx, request.Step{Name: "retry", Status: "waiting",
		Detail: fmt.Sprintf("attempt %d failed (%v); retrying in %s", attempt, cause, delay)})
	select {
	case <-ctx.Done():
		d.drop(e)
		return 0
	case <-d.cfg.Sleep(delay):
	}
	e.req.Attempts, e.req.Status = attempt, request.Running
	next, err := d.claim(ctx, e)
	if err != nil {
		d.logClaimFailure(ctx, e, err)
		return 0
	}
	return next
}

func (d *Dispatcher) finish(ctx context.Context, e *entry, attempt int, claimed bool, st request.Status, result any, err error) {
	d.finishAt(ctx, e, attempt, claimed, st, result, err, d.cfg.Now())
}

// finishAt hands the outcome to the batch writer.
func (d *Dispatcher) finishAt(ctx context.Context, e *entry, attempt int, claimed bool, st request.Status, result any, herr error, started time.Time) {
	o := &outcome{e: e, status: st, attempts: attempt, claimed: claimed, started: started}
	if result != nil {
		b, err := json.Marshal(result)
		if err != nil {
			st, herr = request.Failed, fmt.Errorf("encode result: %w", err)
			o.status = st
		} else {
			o.result = b
		}
	}
	if herr != nil {
		msg := herr.Error()
		o.errText = &msg
	}
	d.unwritten.Add(1)
	select {
	case d.writer.in <- o:
	case <-ctx.Done():
		d.unwritten.Add(-1)
		d.drop(e)
	}
}

// outcomeDone runs after the outcome batch committed (written) or the outcome was found stale.
func (d *Dispatcher) outcomeDone(o *outcome, written bool) {
	defer d.unwritten.Add(-1)
	if written && d.cfg.Observer != nil {
		run := d.cfg.Now().Sub(o.started)
		wait := o.started.Sub(o.e.req.CreatedAt)
		if o.e.req.CreatedAt.IsZero() || wait < 0 {
			wait = 0
		}
		d.cfg.Observer.RequestFinished(o.e.req.Kind, string(o.status), wait, run)
	}
	d.forget(o.e)
}

// drop forgets e without acknowledging anything: its row is unfinished and will be re-read.
func (d *Dispatcher) drop(e *entry) {
	d.mu.Lock()
	if d.inflight[e.req.ID] == e {
		delete(d.inflight, e.req.ID)
	}
	d.mu.Unlock()
	d.gate.Unlock(e.req.ID)
}

// claim moves the request to running with a new attempt number. A 0-row result is retried for a
// short while because a decoded row may not be visible yet; a row that is visible but finished or
// at another attempt is stale.
func (d *Dispatcher) claim(ctx context.Context, e *entry) (int, error) {
	deadline := d.cfg.Now().Add(visibilityBudget)
	for delay := time.Millisecond; ; delay = min(delay*2, 100*time.Millisecond) {
		var attempt int
		err := d.cfg.Pool.QueryRow(ctx, claimSQL, e.req.ID, e.req.Attempts).Scan(&attempt)
		if err == nil {
			return attempt, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("claim request %s: %w", e.req.ID, err)
		}
		visible, err := rowVisible(ctx, d.cfg.Pool, e)
		if err != nil {
			return 0, err
		}
		if visible || d.cfg.Now().After(deadline) {
			return 0, errStale
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-d.cfg.Sleep(delay):
		}
	}
}

func rowVisible(ctx context.Context, pool *pgxpool.Pool, e *entry) (bool, error) {
	var status string
	var attempts int
	var cancelled bool
	err := pool.QueryRow(ctx, rowStateSQL, e.req.ID).Scan(&status, &attempts, &cancelled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read request %s: %w", e.req.ID, err)
	}
	return true, nil
}

// readUnfinished lists the pending and running requests.
func readUnfinished(ctx context.Context, pool *pgxpool.Pool) ([]request.Request, error) {
	rows, err := pool.Query(ctx, unfinishedSQL)
	if err != nil {
		return nil, fmt.Errorf("read unfinished requests: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (request.Request, error) {
		var r request.Request
		var args []byte
		var status string
		err := row.Scan(&r.ID, &r.Kind, &args, &status, &r.Attempts, &r.RequestedBy, &r.CancelRequested, &r.CreatedAt)
		r.Args, r.Status = args, request.Status(status)
		return r, err
	})
}

// reporter writes steps to the row as they happen.
type reporter struct {
	d       *Dispatcher
	e       *entry
	attempt int
}

func (r *reporter) Step(ctx context.Context, s request.Step) {
	if s.At.IsZero() {
		s.At = r.d.cfg.Now().UTC()
	}
	b, err := json.Marshal([]request.Step{s})
	if err == nil {
		_, err = r.d.cfg.Pool.Exec(context.WithoutCancel(ctx), appendStepSQL, r.e.req.ID, r.attempt, b)
	}
	if err != nil {
		r.d.cfg.Logger.Warn("recording a request step failed", "request", r.e.req.ID, "step", s.Name, "error", err)
	}
}

// Drain stops taking requests and waits (until ctx ends) for running handlers to finish and
// their outcomes to be written.
func (d *Dispatcher) Drain(ctx context.Context) error {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.poke()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("handlers still running after the grace period: %w", ctx.Err())
	}
	for {
		if d.unwritten.Load() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("outcomes still unwritten after the grace period: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
