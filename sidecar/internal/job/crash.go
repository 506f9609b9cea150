package job

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// MaxRunnerCrashes is how many times one request's runner may crash before the request fails.
// A crash is not always the job's fault: DuckDB's postgres extension has been seen to crash when
// the server ends its catalog session mid-query (a restart, an administrator's
// pg_terminate_backend), which another run cures. A job that crashes DuckDB every time fails
// after this many runs instead of retrying for the whole retry window.
const MaxRunnerCrashes = 3

// crashCounter counts runner crashes per request, in memory: a new leader starts again from
// zero, which bounds the retries per leader.
type crashCounter struct {
	mu sync.Mutex
	n  map[uuid.UUID]int
}

// classify returns crash (the runner's scrubbed CrashError) as retryable while the request of
// ctx's attempt has crashed fewer than MaxRunnerCrashes times, else as final, saying so.
func (c *crashCounter) classify(ctx context.Context, crash error) error {
	a := fence.FromContext(ctx)
	if a == nil {
		return crash
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[uuid.UUID]int{}
	}
	c.n[a.Request]++
	n := c.n[a.Request]
	if n < MaxRunnerCrashes {
		return request.Retryable(fmt.Errorf("runner crash %d of at most %d, retrying: %w", n, MaxRunnerCrashes, crash))
	}
	delete(c.n, a.Request)
	return fmt.Errorf("the DuckDB runner crashed %d times running this request (look for what the job does differently, or report the stderr below): %w", n, crash)
}

// forget drops the count of ctx's request (its job ran to the end).
func (c *crashCounter) forget(ctx context.Context) {
	if a := fence.FromContext(ctx); a != nil {
		c.mu.Lock()
		delete(c.n, a.Request)
		c.mu.Unlock()
	}
}
