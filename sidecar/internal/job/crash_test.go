package job

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// A runner crash is retried, as a new attempt, a bounded number of times per request; then it
// fails the request and says how often it crashed. Another request's crashes do not count.
func TestRunnerCrashesAreRetriedABoundedNumberOfTimes(t *testing.T) {
	var c crashCounter
	crash := errors.New("the DuckDB runner was killed by signal SIGSEGV")
	a := &fence.Attempt{Request: uuid.New(), Number: 1}
	ctx := fence.WithAttempt(context.Background(), a)
	for i := 1; i < MaxRunnerCrashes; i++ {
		if err := c.classify(ctx, crash); !request.IsRetryable(err) {
			t.Fatalf("crash %d: %v is final, want a retry", i, err)
		}
	}
	other := fence.WithAttempt(context.Background(), &fence.Attempt{Request: uuid.New(), Number: 1})
	if err := c.classify(other, crash); !request.IsRetryable(err) {
		t.Fatalf("another request's first crash: %v is final", err)
	}
	err := c.classify(ctx, crash)
	if request.IsRetryable(err) || !strings.Contains(err.Error(), "crashed 3 times") || !errors.Is(err, crash) {
		t.Fatalf("crash %d: %v, want a final error naming the count", MaxRunnerCrashes, err)
	}
	// A job that ran to the end forgets the count: the next crash is a first one again.
	c.forget(other)
	if err := c.classify(other, crash); !strings.Contains(err.Error(), "crash 1 of") {
		t.Fatalf("after forget: %v", err)
	}
	if err := c.classify(context.Background(), crash); err != crash {
		t.Fatalf("outside a request: %v, want the crash unchanged", err)
	}
}
