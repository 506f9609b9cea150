package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestShortChaosRun is the short chaos run of `make test`: about 100 leader kills and the other
// fault classes in proportion, one CPU hog, the whole workload, and every check of the full run
// (`make chaos`). It asserts correctness only; the report it writes (to the test's temporary
// directory) carries the times.
func TestShortChaosRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "RELIABILITY.md")
	rep, err := Run(context.Background(), Options{Kills: 100, Hogs: 1, Seed: 12, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep.Kills < 100 {
		t.Errorf("%d leader kills, want at least 100", rep.Kills)
	}
	for _, c := range faultClasses {
		if rep.ByClass[c].Injected == 0 {
			t.Errorf("no %s injected", c)
		}
	}
	if !rep.Clean() {
		t.Errorf("the chaos run is not clean: %s\n%s", rep.Summary(), md)
	}
}
