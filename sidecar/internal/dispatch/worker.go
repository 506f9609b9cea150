package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

var errCancelledByUser = request.ErrCancelledByUser

// worker runs entries of one class (fair.go) until the dispatcher stops.
func (d *Dispatcher) worker(ctx context.Context, class int) {
	defer d.wg.Done()
	for {
		e := d.next(ctx, class)
		if e == nil {
			return
		}
		d.process(ctx, e)
		d.mu.Lock()
		d.running--
		d.doneLocked(e)
		d.mu.Unlock()
		if class == classJob {
			// A job's caps are free again: a waiting job may start, and the waiting move up.
			d.pokeClass(classJob)
			d.queueChanged()
		}
	}
}

// next takes the entry a worker of class runs next (pickLocked), or returns nil when stopping.
func (d *Dispatcher) next(ctx context.Context, class int) *entry {
	for {
		d.mu.Lock()
		if d.stopping {
			d.mu.Unlock()
			d.poke() // wake the next idle worker so it sees stopping too
			return nil
		}
		if i := d.pickLocked(class); i >= 0 {
			e := d.queue[i]
			d.queue = slices.Delete(d.queue, i, i+1)
			d.running++
			d.startLocked(e)
			more := d.pickLocked(class) >= 0
			d.mu.Unlock()
			if more {
				d.pokeClass(class)
			}
			if class == classJob {
				d.queueChanged()
			}
			return e
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-d.wakes[class]:
		}
	}
}

// process takes one step of a request: claim it (unless stateless) and run its handler, or
// decide what a claim that matched no row means.
func (d *Dispatcher) process(ctx context.Context, e *entry) {
	h, ok := d.cfg.Registry.Lookup(e.req.Kind)
	if !ok {
		d.finish(ctx, e, e.req.Attempts, false, request.Failed, nil,
			fmt.Errorf("this sidecar has no handler for request kind %q: upgrade the sidecar", e.req.Kind))
		return
	}
	if request.IsStateless(h, &e.req) {
		d.runHandler(ctx, e, h, e.req.Attempts, false)
		return
	}
	// The requester is checked beside the claim (the handler's wrapper waits for the answer):
	// both are round trips to the control database, and neither acts outside it.
	auth := d.cfg.Registry.Preauthorize(ctx, &e.req)
	c := d.claim(ctx, e)
	ev := Event{Request: e.req.ID, Attempt: c.attempt, Reason: c.reason}
	switch c.kind {
	case claimed:
		e.claimTries = 0
		d.markDurable(e)
		d.cfg.Signals.send(sigClaimed, ev)
		crashpoint.HitOnce("dispatch.after_claim")
		d.runHandler(request.WithAuthorization(ctx, auth), e, h, c.attempt, true)
	case claimLater:
		e.claimTries++
		if e.claimTries == 10 {
			d.cfg.Logger.Info("request claim keeps matching no row; still trying", "request", e.req.ID, "reason", c.reason)
		}
		d.cfg.Signals.send(sigDeferred, ev)
		d.later(e, c.delay)
	case claimLetGo:
		d.cfg.Logger.Info("request moved on; letting it go", "request", e.req.ID, "reason", c.reason,
			"held_attempt", e.req.Attempts, "row_status", c.row.status, "row_attempts", c.row.attempts)
		d.cfg.Signals.send(sigLetGo, ev)
		d.forget(e)
	case claimCancel:
		d.noteCancelled(ctx, e, h, c.attempt)
		d.finish(ctx, e, c.attempt, true, request.Cancelled, nil, errCancelledByUser)
	case claimStopping:
		d.drop(e)
	}
}

// noteCancelled tells a handler that keeps its outcome elsewhere too that its request is
// cancelled without running again.
func (d *Dispatcher) noteCancelled(ctx context.Context, e *entry, h request.Handler, attempt int) {
	n, ok := h.(request.CancelNoter)
	if !ok {
		return
	}
	req := e.req
	req.Attempts, req.Status = attempt, request.Running
	if err := n.NoteCancelled(ctx, &req); err != nil {
		d.cfg.Logger.Warn("recording a cancellation outside the request row failed", "request", e.req.ID, "error", err)
	}
}

func (d *Dispatcher) runHandler(ctx context.Context, e *entry, h request.Handler, attempt int, claimed bool) {
	hctx, cancel := context.WithCancelCause(ctx)
	rep := &reporter{d: d, e: e, attempt: attempt}
	if claimed {
		// The attempt names its sessions and fences earlier attempts' (sidecar/internal/fence).
		hctx = fence.WithAttempt(hctx, &fence.Attempt{Instance: d.cfg.Instance, Request: e.req.ID, Number: attempt,
			Reporter: func(name, status, detail string) {
				rep.Step(hctx, request.Step{Name: name, Status: status, Detail: detail})
			}})
	}
	d.mu.Lock()
	e.cancel = cancel
	d.mu.Unlock()
	if e.userStop.Load() {
		cancel(errCancelledByUser)
	}
	req := e.req
	req.Attempts, req.Status = attempt, request.Running
	started := d.cfg.Now()
	result, err := h.Handle(hctx, &req, rep)
	cancel(nil)
	done := func(st request.Status, result any, err error) {
		d.finishAt(ctx, e, outcome{attempts: attempt, claimed: claimed, started: started, steps: rep.takeHeld()}, st, result, err)
	}
	switch {
	case e.userStop.Load() && err != nil:
		done(request.Cancelled, nil, errCancelledByUser)
	case ctx.Err() != nil:
		rep.flush(ctx)
		d.drop(e) // shutdown or lost leadership: the next leader resumes it
	case err != nil && request.IsTransient(err) && d.mayRetry(e): // a stateless kind (ping) runs again too
		d.retryLater(ctx, e, rep, err)
	case err != nil:
		done(request.Failed, nil, d.finalError(e, err))
	default:
		done(request.Succeeded, result, nil)
	}
}

// mayRetry reports whether the entry is still within its retry window.
func (d *Dispatcher) mayRetry(e *entry) bool {
	return e.failingSince.IsZero() || d.cfg.Now().Sub(e.failingSince) < d.cfg.RetryWindow
}

// finalError is the error a request fails with; a transient fault that outlasted the retry
// window says so.
func (d *Dispatcher) finalError(e *entry, err error) error {
	if e.failures > 0 && request.IsTransient(err) {
		return fmt.Errorf("%w (still failing after retrying for %s: fix the cause, then make the request again)",
			err, d.cfg.RetryWindow)
	}
	return err
}

// retryLater records a "retrying" step and queues the entry again after a capped backoff; its
// next claim takes a new attempt, which fences this one's sessions and re-checks state.
func (d *Dispatcher) retryLater(ctx context.Context, e *entry, rep *reporter, cause error) {
	attempt := rep.attempt
	e.failures++
	if e.failingSince.IsZero() {
		e.failingSince = d.cfg.Now()
	}
	delay := min(200*time.Millisecond<<min(e.failures-1, 8), 30*time.Second)
	rep.Step(ctx, request.Step{Name: "retry", Status: "retrying",
		Detail: fmt.Sprintf("attempt %d hit a transient fault (%v); attempt %d starts in %s", attempt, cause, attempt+1, delay)})
	d.cfg.Logger.Warn("request hit a transient fault; retrying", "request", e.req.ID, "kind", e.req.Kind,
		"attempt", attempt, "retry_in", delay, "error", cause)
	d.cfg.Signals.send(sigRetrying, Event{Request: e.req.ID, Attempt: attempt, Reason: cause.Error()})
	e.req.Attempts, e.req.Status = attempt, request.Running // what the next claim expects
	d.later(e, delay)
}

func (d *Dispatcher) finish(ctx context.Context, e *entry, attempt int, claimed bool, st request.Status, result any, err error) {
	d.finishAt(ctx, e, outcome{attempts: attempt, claimed: claimed, started: d.cfg.Now()}, st, result, err)
}

// finishAt hands the outcome to the batch writer: o's attempt, claim, start and held steps, with
// the status, result and error given.
func (d *Dispatcher) finishAt(ctx context.Context, e *entry, o outcome, st request.Status, result any, herr error) {
	o.e, o.status = e, st
	if result != nil {
		b, err := json.Marshal(result)
		if err != nil {
			herr = fmt.Errorf("encode result: %w", err)
			o.status = request.Failed
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
	case d.writer.in <- &o:
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

// Drain stops taking requests and waits (until ctx ends) for running handlers to finish and
// their outcomes to be written. Entries waiting to be claimed again stay unfinished rows, which
// the next leader resumes.
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
