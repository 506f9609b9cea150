// Package request defines a dataenv request as the sidecar sees it and the contract between the
// dispatcher and the handlers that perform one kind of request.
package request

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Status is the lifecycle state of a request row (dataenv.requests.status).
type Status string

const (
	Pending   Status = "pending"
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Finished reports whether no further transition can happen.
func (s Status) Finished() bool {
	return s == Succeeded || s == Failed || s == Cancelled
}

// Request is a request as decoded from replication or read back from the table. Handlers get it
// read-only; Args is the validated jsonb the caller inserted.
type Request struct {
	ID              uuid.UUID
	Kind            string
	Args            json.RawMessage
	Status          Status
	Attempts        int
	RequestedBy     string
	CancelRequested bool
	CreatedAt       time.Time
}

// Reporter records a step of the request's per-step report. Steps are written to the row at once
// (compare-and-set on the attempt), so a caller polling the row sees them while the handler runs:
// for example "waiting for the lifecycle lock of cluster x".
type Reporter interface {
	Step(ctx context.Context, step Step)
}

// Step is one entry of dataenv.requests.steps.
type Step struct {
	Name   string    `json:"name"`
	Status string    `json:"status"` // e.g. started, done, created, unchanged, refused, failed, waiting
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// Handler performs one kind of request. Handle must be idempotent: after a crash at any point the
// dispatcher calls it again (with a higher attempt number) and it must finish the job without
// doing anything twice. The returned value is marshalled to JSON as the request's result. A
// returned error fails the request with err.Error() as the text a person reads, so it must never
// contain a secret.
type Handler interface {
	Handle(ctx context.Context, req *Request, rep Reporter) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request, rep Reporter) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request, rep Reporter) (any, error) {
	return f(ctx, req, rep)
}

// Stateless is implemented by handlers whose request has no side effect (ping). The dispatcher
// then skips the durable "running" state and writes the outcome straight away: running it twice
// after a crash is harmless.
type Stateless interface {
	Stateless() bool
}

// StatelessFor is implemented by handlers whose requests are stateless case by case (a
// satellite's envelope is when it carries a ping): the dispatcher asks it of each request.
type StatelessFor interface {
	StatelessFor(req *Request) bool
}

// IsStateless reports whether req, run by h, has no side effect (Stateless, StatelessFor), so
// the dispatcher may run it without claiming it.
func IsStateless(h Handler, req *Request) bool {
	if st, ok := h.(StatelessFor); ok && st.StatelessFor(req) {
		return true
	}
	st, ok := h.(Stateless)
	return ok && st.Stateless()
}

// CancelNoter is implemented by handlers that keep a copy of the outcome elsewhere (a satellite's
// row): the dispatcher calls it when it cancels a claimed request without running the handler
// (cancelled between two attempts), before it writes the cancellation. An error is logged; the
// cancellation is written anyway.
type CancelNoter interface {
	NoteCancelled(ctx context.Context, req *Request) error
}

// Report records a step on rep, which may be nil (code run outside a request, tests).
func Report(ctx context.Context, rep Reporter, name, status, detail string) {
	if rep == nil {
		return
	}
	rep.Step(ctx, Step{Name: name, Status: status, Detail: detail})
}

// Holder is a Reporter that can hold a step back and write it with the request's outcome, in the
// outcome's own commit, when the request ends soon; a step still held after a short while is
// written on its own, and a step reported after it (by Step) writes it first, so the order holds.
// A held step of an attempt that dies unfinished is lost with the attempt (its next attempt
// reports its own).
type Holder interface {
	Hold(ctx context.Context, step Step)
}

// ReportHeld records a step on rep like Report, held for the outcome where rep can hold it: for a
// step a request reports just before a short piece of work (a job), whose own commit would compete
// with that work.
func ReportHeld(ctx context.Context, rep Reporter, name, status, detail string) {
	if h, ok := rep.(Holder); ok {
		h.Hold(ctx, Step{Name: name, Status: status, Detail: detail})
		return
	}
	Report(ctx, rep, name, status, detail)
}

// Holding is rep with every step held (Holder), where rep can hold steps: for a request made of
// short steps, whose steps then cost no commit of their own when it ends soon, and are written
// together, a short while late, when it does not.
func Holding(rep Reporter) Reporter {
	if h, ok := rep.(Holder); ok {
		return holding{h}
	}
	return rep
}

type holding struct{ h Holder }

func (r holding) Step(ctx context.Context, s Step) { r.h.Hold(ctx, s) }

// Reportf is Report with a formatted detail.
func Reportf(ctx context.Context, rep Reporter, name, status, format string, args ...any) {
	if rep == nil {
		return
	}
	Report(ctx, rep, name, status, fmt.Sprintf(format, args...))
}
