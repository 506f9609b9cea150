package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
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
// job (each job's process is new and gone once it is done), and the pool is refilled in the
// background.
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
		if n := len(group(pgid)); n != 0 {
			t.Fatalf("runner %d of job %d still has %d processes after its job", pgid, i, n)
		}
		if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the pool is refilled to 2", func() bool { return c.Spares(client.IsolationPlain) == 2 })
	c.Close()
	assertEmptyDir(t, root)
}
