package request

import (
	"context"
	"fmt"
	"sort"
)

// Authorizer decides whether the role that made a request (RequestedBy) may make it, under the
// policy its kind declares (dataenv.request_kinds.policy). A refusal is a *RefusedError whose
// text says what to do; any other error is worth another attempt.
type Authorizer interface {
	Authorize(ctx context.Context, req *Request) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, req *Request) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, req *Request) error { return f(ctx, req) }

// Registry maps request kinds to their handlers. It is filled at start-up by the composition root
// and read-only afterwards. Every handler it hands out is wrapped by its Authorizer: the request's
// requester is checked before the handler runs, on every attempt, whatever the kind.
type Registry struct {
	auth     Authorizer
	handlers map[string]Handler
}

// NewRegistry returns an empty registry whose handlers are authorized by auth (required: a
// registry that would run handlers unchecked is a programming error).
func NewRegistry(auth Authorizer) *Registry {
	if auth == nil {
		panic("request.NewRegistry: an Authorizer is required")
	}
	return &Registry{auth: auth, handlers: map[string]Handler{}}
}

// Register adds the handler of kind; registering a kind twice is a programming error.
func (r *Registry) Register(kind string, h Handler) {
	if _, dup := r.handlers[kind]; dup {
		panic(fmt.Sprintf("request kind %q registered twice", kind))
	}
	r.handlers[kind] = authorized{h: h, auth: r.auth}
}

// Lookup returns the handler of kind, wrapped by the registry's Authorizer.
func (r *Registry) Lookup(kind string) (Handler, bool) {
	h, ok := r.handlers[kind]
	return h, ok
}

// Kinds lists the registered kinds in order.
func (r *Registry) Kinds() []string {
	kinds := make([]string, 0, len(r.handlers))
	for k := range r.handlers {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// authorized runs its handler only once the Authorizer allowed the request. It keeps the
// handler's Stateless and StatelessFor answers and its CancelNoter, which the dispatcher reads from the handler it
// looks up.
type authorized struct {
	h    Handler
	auth Authorizer
}

func (a authorized) Handle(ctx context.Context, req *Request, rep Reporter) (any, error) {
	if err := a.authorize(ctx, req); err != nil {
		if IsRefused(err) {
			Report(ctx, rep, "authorization", "refused", err.Error())
			return nil, err
		}
		return nil, Retryable(fmt.Errorf("%s: check who may make it: %w", req.Kind, err))
	}
	return a.h.Handle(ctx, req, rep)
}

func (a authorized) Stateless() bool {
	st, ok := a.h.(Stateless)
	return ok && st.Stateless()
}

func (a authorized) StatelessFor(req *Request) bool {
	st, ok := a.h.(StatelessFor)
	return ok && st.StatelessFor(req)
}

func (a authorized) NoteCancelled(ctx context.Context, req *Request) error {
	if n, ok := a.h.(CancelNoter); ok {
		return n.NoteCancelled(ctx, req)
	}
	return nil
}
