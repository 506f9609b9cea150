package engine_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// A response times each part of the job the runner reached, and only those: a job whose setup
// failed spent nothing on the sandbox or its own SQL.
func TestPhasesTimeThePartsReached(t *testing.T) {
	ctx := context.Background()
	ok := engine.RunOn(ctx, openInstance(t), &protocol.Request{
		Setup:   []string{"CREATE TABLE t AS SELECT * FROM range(1000) r(x)"},
		Probes:  []string{"SELECT count(*) FROM t"},
		Sandbox: &protocol.Sandbox{},
		Blocks:  []string{"SELECT sum(x) FROM t"},
	}, nil)
	if ok.Error != "" {
		t.Fatal(ok.Error)
	}
	p := ok.Phases
	if p.Settings < 0 || p.Setup <= 0 || p.Probes <= 0 || p.Sandbox <= 0 || p.Blocks <= 0 {
		t.Fatalf("phases %+v: want every part timed", p)
	}
	bad := engine.RunOn(ctx, openInstance(t), &protocol.Request{
		Setup:   []string{"SELECT * FROM missing"},
		Sandbox: &protocol.Sandbox{},
		Blocks:  []string{"SELECT 1"},
	}, nil)
	if bad.Error == "" || bad.ErrorBlock != -1 {
		t.Fatalf("a failing setup: %+v", bad)
	}
	if p := bad.Phases; p.Setup <= 0 || p.Sandbox != 0 || p.Blocks != 0 {
		t.Fatalf("phases %+v of a job whose setup failed: want its setup timed and no sandbox or blocks", p)
	}
}
