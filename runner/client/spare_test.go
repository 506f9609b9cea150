package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/protocol"
)

// A warm spare (process up, DuckDB open, extensions loaded) runs the next job, and a new spare
// takes its place once the job is done.
func TestWarmSpareRunsTheNextJob(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode, WarmSpare: true})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.Prewarm(ctx, mode); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				res, err := c.Run(ctx, client.Job{Blocks: []string{
					"SET memory_limit = '500MB'",
					"SELECT count(*) FROM duckdb_extensions() WHERE loaded AND extension_name = 'ducklake'",
				}, CollectLastOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Warm || string(res.Results[0].Rows[0][0]) != "1" {
					t.Fatalf("job %d: warm %v, ducklake loaded %s", i, res.Warm, res.Results[0].Rows[0][0])
				}
				if err := c.Prewarm(ctx, mode); err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
			assertEmptyDir(t, root)
		})
	}
}

// A pool of spares: every job runs on a spare of its own (Warm), no runner ever takes a second
// job (each job's process is new and gone once its job is done), and the pool is refilled in
// the background.
func TestWarmSparePoolNeverReusesARunner(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationPlain, WarmSpares: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
		t.Fatal(err)
	}
	if n := c.Spares(client.IsolationPlain); n != 2 {
		t.Fatalf("%d spares after Prewarm; want 2", n)
	}
	seen := map[int]bool{}
	for i := 0; i < 4; i++ {
		var pgid int
		res, err := c.Run(ctx, client.Job{Blocks: []string{"SELECT 1"}, Started: func(p int) { pgid = p }})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Warm {
			t.Fatalf("job %d did not run on a spare", i)
		}
		if seen[pgid] {
			t.Fatalf("job %d ran on runner %d again", i, pgid)
		}
		seen[pgid] = true
		// Its result is read as soon as it is written: the runner exits meanwhile.
		eventually(t, 30*time.Second, fmt.Sprintf("runner %d of job %d is gone", pgid, i), func() bool { return len(group(pgid)) == 0 })
		if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the pool is refilled to 2", func() bool { return c.Spares(client.IsolationPlain) == 2 })
	c.Close()
	assertEmptyDir(t, root)
}

// Jailed jobs with mounts (a local lake) get spares of their own: from the second job of a set
// of mounts on, the next one runs on a spare bound to exactly those directories, and sees them
// as a new runner would. A directory removed and created again under the same path is another
// directory: the spare bound to the old one is not used for it.
func TestJailedSparesForAMountSet(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationJailed, WarmSpares: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lake := filepath.Join(t.TempDir(), "lake")
	if err := os.Mkdir(lake, 0o755); err != nil {
		t.Fatal(err)
	}
	mounts := []client.Mount{{Path: lake, Writable: true}}
	run := func(i int, sql string) *client.Result {
		t.Helper()
		res, err := c.Run(ctx, client.Job{Blocks: []string{sql}, Mounts: mounts})
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		return res
	}
	count := "SELECT count(*) FROM glob(" + sqlString(lake+"/*") + ")"
	for i := 0; i < 2; i++ {
		if res := run(i, "COPY (SELECT 1 AS x) TO "+sqlString(fmt.Sprintf("%s/%d.csv", lake, i))); res.Warm {
			t.Fatalf("job %d of a new set of mounts ran on a spare", i)
		}
	}
	if err := c.PrewarmMounted(ctx, mounts); err != nil {
		t.Fatal(err)
	}
	if n := c.Spares(client.IsolationJailed); n != 0 {
		t.Fatalf("%d spares without mounts; the mounted set's spares are kept apart", n)
	}
	res := run(2, count)
	if !res.Warm || string(res.Results[0].Rows[0][0]) != "2" {
		t.Fatalf("third job: warm %v, files seen %s; want a spare that sees the 2 files", res.Warm, res.Results[0].Rows[0][0])
	}
	if err := c.PrewarmMounted(ctx, mounts); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(lake); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(lake, 0o755); err != nil {
		t.Fatal(err)
	}
	if n := c.MountedSpares(mounts); n != 0 {
		t.Fatalf("%d spares for the new directory; the one kept is bound to the removed directory", n)
	}
	if res := run(3, count); res.Warm || string(res.Results[0].Rows[0][0]) != "0" {
		t.Fatalf("job in the new directory: warm %v, files seen %s; want a runner of its own in the empty directory",
			res.Warm, res.Results[0].Rows[0][0])
	}
	c.Close()
	assertEmptyDir(t, root)
}

// A spare taken while the pool holds another is replaced once its job is done, not while the job
// runs: a runner's start would compete with the job for the CPU. The last spare taken is
// replaced at once, for a job that comes meanwhile.
func TestSpareReplacedAfterTheJobWhileAnotherIsLeft(t *testing.T) {
	for _, tc := range []struct {
		spares, duringJob int
	}{{2, 1}, {1, 1}} {
		t.Run(fmt.Sprintf("%d spares", tc.spares), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: client.IsolationPlain, WarmSpares: tc.spares})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
				t.Fatal(err)
			}
			during := -1
			res, err := c.Run(ctx, client.Job{Blocks: []string{"SELECT 1"}, Started: func(int) {
				// Time for a replacement started at the take to be in the pool.
				time.Sleep(time.Second)
				during = c.Spares(client.IsolationPlain)
			}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Warm {
				t.Fatal("the job did not run on a spare")
			}
			if during != tc.duringJob {
				t.Fatalf("%d spares in the pool while the job ran; want %d", during, tc.duringJob)
			}
			eventually(t, 30*time.Second, "the pool to be refilled", func() bool { return c.Spares(client.IsolationPlain) == tc.spares })
			c.Close()
			assertEmptyDir(t, root)
		})
	}
}

// A warm spare's result is read as soon as the runner says it is written, while the runner
// still exits, at the lowest priority (so that its exit does not compete with the outcome being
// written); its work directory is removed once it has exited, and Close waits for that. A
// runner built for the tests stays a while between its result and its exit (ExitDelayMS).
func TestWarmResultIsReadWhileTheRunnerExits(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationPlain, WarmSpares: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
		t.Fatal(err)
	}
	var pgid int
	res, err := c.Run(ctx, client.Job{Blocks: []string{"SELECT 42"}, Started: func(p int) { pgid = p },
		TestHook: &protocol.TestHook{ExitDelayMS: 5000}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm || string(res.Results[0].Rows[0][0]) != "42" {
		t.Fatalf("warm %v, rows %v", res.Warm, res.Results[0].Rows)
	}
	if len(group(pgid)) == 0 {
		t.Fatal("the client waited for the runner to exit before it read the result")
	}
	// (It lowers its priority just after it says its result is written.)
	eventually(t, 4*time.Second, "every thread of the exiting runner at nice 19", func() bool {
		tids := threadsOf(pgid)
		for _, tid := range tids {
			if niceOf(pgid, tid) != 19 {
				return false
			}
		}
		return len(tids) > 0
	})
	c.Close()
	if n := len(group(pgid)); n != 0 {
		t.Fatalf("runner %d still has %d processes after Close", pgid, n)
	}
	assertEmptyDir(t, root)
}
