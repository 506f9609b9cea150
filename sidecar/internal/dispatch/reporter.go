package dispatch

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// holdFor is how long a held step (request.Holder) may wait for its request's outcome before it
// is written on its own: a job that runs longer shows it while it runs.
const holdFor = 500 * time.Millisecond

// reporter writes a request's steps to its row: each step as it happens, or, held, with the
// outcome (request.Holder). An UPDATE of its own is a commit, an fsync and a replication event
// the sidecar decodes, all beside the work that follows it.
type reporter struct {
	d       *Dispatcher
	e       *entry
	attempt int

	mu     sync.Mutex
	held   []request.Step
	timer  *time.Timer
	closed bool // the outcome took the held steps: later ones are written at once
}

// Step writes s, after any held steps (in one UPDATE).
func (r *reporter) Step(ctx context.Context, s request.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	steps := append(r.held, r.stamp(s))
	r.held = nil
	r.write(ctx, steps)
}

// Hold keeps s for the outcome; holdFor later it is written (with whatever else is held) if the
// outcome has not taken it.
func (r *reporter) Hold(ctx context.Context, s request.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.write(ctx, []request.Step{r.stamp(s)})
		return
	}
	r.held = append(r.held, r.stamp(s))
	if r.timer == nil {
		wctx := context.WithoutCancel(ctx)
		r.timer = time.AfterFunc(holdFor, func() { r.flush(wctx) })
	}
}

// flush writes the held steps now; the next step held arms the timer again.
func (r *reporter) flush(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if len(r.held) > 0 {
		r.write(ctx, r.held)
		r.held = nil
	}
}

// takeHeld hands the held steps to the outcome (JSON, nil for none). A flush under way has
// written its steps once this returns, so the outcome's commit comes after it.
func (r *reporter) takeHeld() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	held := r.held
	r.held = nil
	if len(held) == 0 {
		return nil
	}
	b, err := json.Marshal(held)
	if err != nil {
		r.d.cfg.Logger.Warn("encoding held request steps failed", "request", r.e.req.ID, "error", err)
		return nil
	}
	return b
}

func (r *reporter) stamp(s request.Step) request.Step {
	if s.At.IsZero() {
		s.At = r.d.cfg.Now().UTC()
	}
	return s
}

// write appends steps to the row, if the attempt still runs; a failure is logged, never the
// request's.
func (r *reporter) write(ctx context.Context, steps []request.Step) {
	b, err := json.Marshal(steps)
	if err == nil {
		_, err = r.d.cfg.Pool.Exec(context.WithoutCancel(ctx), appendStepSQL, r.e.req.ID, r.attempt, b)
	}
	if err != nil {
		r.d.cfg.Logger.Warn("recording a request step failed", "request", r.e.req.ID, "step", steps[len(steps)-1].Name, "error", err)
	}
}
