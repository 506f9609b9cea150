package client_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
)

// The disk watchdog of a job ends with the job: a sidecar that ran many jobs does not keep
// measuring their directories.
func TestWatchdogsEndWithTheirJobs(t *testing.T) {
	c, _ := newClient(t, client.Config{Isolation: client.IsolationPlain})
	run := func() {
		if _, err := c.Run(context.Background(), client.Job{Blocks: []string{"SELECT 1"}, WatchDirs: []string{t.TempDir()}}); err != nil {
			t.Fatal(err)
		}
	}
	run()
	time.Sleep(100 * time.Millisecond)
	before := runtime.NumGoroutine()
	for range 5 {
		run()
	}
	time.Sleep(100 * time.Millisecond)
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Fatalf("goroutines: %d after one job, %d after five more: the jobs' watchdogs are still running", before, after)
	}
}
