package request_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// countingAuth refuses requests made by "mallory" and counts the checks per request id.
type countingAuth struct {
	mu     sync.Mutex
	checks map[uuid.UUID]int
}

func (c *countingAuth) Authorize(_ context.Context, req *request.Request) error {
	c.mu.Lock()
	c.checks[req.ID]++
	c.mu.Unlock()
	if req.RequestedBy == "mallory" {
		return request.Refusef("%s may not", req.RequestedBy)
	}
	return nil
}

type runsInner struct{ inner *request.Request }

// An authorization started beside the claim answers for its own request only: the handler's
// wrapper uses it instead of checking again, and a request run under the same context with
// anything else (another requester, as a satellite's envelope runs its origin's) is checked
// anew.
func TestPreauthorizationCoversOnlyItsRequest(t *testing.T) {
	auth := &countingAuth{checks: map[uuid.UUID]int{}}
	reg := request.NewRegistry(auth)
	ran := map[string]bool{}
	reg.Register("k", request.HandlerFunc(func(_ context.Context, req *request.Request, _ request.Reporter) (any, error) {
		ran[req.RequestedBy] = true
		return nil, nil
	}))
	h, _ := reg.Lookup("k")
	ctx := context.Background()

	alice := &request.Request{ID: uuid.New(), Kind: "k", RequestedBy: "alice", Args: json.RawMessage(`{}`)}
	pre := reg.Preauthorize(ctx, alice)
	actx := request.WithAuthorization(ctx, pre)
	if _, err := h.Handle(actx, alice, nil); err != nil || !ran["alice"] {
		t.Fatalf("alice: %v (ran %v)", err, ran["alice"])
	}
	if n := auth.checks[alice.ID]; n != 1 {
		t.Fatalf("alice's request checked %d times; want once (ahead)", n)
	}

	// The same id under that context, but another requester or other arguments: checked anew.
	for _, other := range []*request.Request{
		{ID: alice.ID, Kind: "k", RequestedBy: "mallory", Args: json.RawMessage(`{}`)},
		{ID: uuid.New(), Kind: "k", RequestedBy: "mallory", Args: json.RawMessage(`{}`)},
	} {
		before := auth.checks[other.ID]
		if _, err := h.Handle(actx, other, nil); !request.IsRefused(err) || ran["mallory"] {
			t.Fatalf("mallory's request under alice's authorization: %v (ran %v); want a refusal", err, ran["mallory"])
		}
		if auth.checks[other.ID] != before+1 {
			t.Fatalf("mallory's request was not checked")
		}
	}

	// A refusal found ahead stops the handler as one found in the wrapper does.
	mallory := &request.Request{ID: uuid.New(), Kind: "k", RequestedBy: "mallory", Args: json.RawMessage(`{}`)}
	mctx := request.WithAuthorization(ctx, reg.Preauthorize(ctx, mallory))
	if _, err := h.Handle(mctx, mallory, nil); !request.IsRefused(err) || ran["mallory"] {
		t.Fatalf("mallory ahead: %v (ran %v); want a refusal", err, ran["mallory"])
	}
}
