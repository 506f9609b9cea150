package request

import "context"

// Authorization is a requester's authorization checked ahead of an attempt, beside the
// dispatcher's claim of the request: the handler then starts one round trip to the control
// database sooner. It answers for exactly the request it was started for (id, kind, requester,
// arguments); a handler that runs another request under the same context (a satellite's
// envelope runs its origin's) has that one checked as usual.
type Authorization struct {
	id, kind, by, args string
	done               chan struct{}
	err                error
}

// Preauthorize starts checking req's requester with the registry's Authorizer.
func (r *Registry) Preauthorize(ctx context.Context, req *Request) *Authorization {
	cp := *req
	a := &Authorization{id: cp.ID.String(), kind: cp.Kind, by: cp.RequestedBy, args: string(cp.Args), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.err = r.auth.Authorize(ctx, &cp)
	}()
	return a
}

// covers reports whether a was started for req.
func (a *Authorization) covers(req *Request) bool {
	return a != nil && a.id == req.ID.String() && a.kind == req.Kind && a.by == req.RequestedBy && a.args == string(req.Args)
}

// wait returns the check's answer once it is in.
func (a *Authorization) wait(ctx context.Context) error {
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type authorizationKey struct{}

// WithAuthorization hands a to the handlers run under ctx: the one of the request it was started
// for uses its answer instead of checking again.
func WithAuthorization(ctx context.Context, a *Authorization) context.Context {
	return context.WithValue(ctx, authorizationKey{}, a)
}

// authorize is the Authorizer's answer for req: the one started ahead for it, else a check now.
func (a authorized) authorize(ctx context.Context, req *Request) error {
	if pre, ok := ctx.Value(authorizationKey{}).(*Authorization); ok && pre.covers(req) {
		return pre.wait(ctx)
	}
	return a.auth.Authorize(ctx, req)
}
