package request

import (
	"fmt"
	"sort"
)

// Registry maps request kinds to their handlers. It is filled at start-up by the composition root
// and read-only afterwards.
type Registry struct {
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{handlers: map[string]Handler{}}
}

// Register adds the handler of kind; registering a kind twice is a programming error.
func (r *Registry) Register(kind string, h Handler) {
	if _, dup := r.handlers[kind]; dup {
		panic(fmt.Sprintf("request kind %q registered twice", kind))
	}
	r.handlers[kind] = h
}

// Lookup returns the handler of kind.
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
