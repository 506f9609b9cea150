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
