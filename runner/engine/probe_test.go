package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// A request's probes run after its setup and before its blocks: their rows are what the setup
// left, whatever the job's SQL does next. A probe that fails says so in its result, and the job
// goes on.
func TestProbesSeeTheStateBeforeTheJob(t *testing.T) {
	ctx := context.Background()
	in := openInstance(t)
	resp := engine.RunOn(ctx, in, &protocol.Request{
		Setup:   []string{"CREATE TABLE t AS SELECT 1 AS x"},
		Probes:  []string{"SELECT count(*) AS n FROM t"},
		Sandbox: &protocol.Sandbox{},
		Blocks:  []string{"INSERT INTO t VALUES (2)", "SELECT count(*) FROM t"},
	}, nil)
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if len(resp.Probes) != 1 || string(resp.Probes[0].Rows[0][0]) != "1" {
		t.Fatalf("probes: %+v; want one row of 1", resp.Probes)
	}
	if got := string(resp.Results[len(resp.Results)-1].Rows[0][0]); got != "2" {
		t.Fatalf("the job counted %s rows; want 2", got)
	}
	bad := engine.RunOn(ctx, openInstance(t), &protocol.Request{Probes: []string{"SELECT * FROM missing", "SELECT 7"},
		Blocks: []string{"SELECT 1"}}, nil)
	if bad.Error != "" || len(bad.Probes) != 2 || !strings.Contains(bad.Probes[0].Error, "missing") ||
		string(bad.Probes[1].Rows[0][0]) != "7" || string(bad.Results[0].Rows[0][0]) != "1" {
		t.Fatalf("a failed probe: %+v; want its error in its result, the next probe and the job run", bad)
	}
}
