package engine_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
)

// Apply sets what differs from what it set last, and leaves alone what it set to the same value
// already (the memory_limit SET below, made behind its back, stays). A failed Apply forgets what
// it set: the next one sets everything again.
func TestApplySetsOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	in := openInstance(t)
	setting := func(name string) string {
		var v string
		if err := in.Conn.QueryRowContext(ctx, "SELECT current_setting('"+name+"')::VARCHAR").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	s := engine.Settings{MemoryLimit: "300MB", Threads: 1, TempDirectory: t.TempDir()}
	if err := in.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Conn.ExecContext(ctx, "SET memory_limit = '200MB'"); err != nil {
		t.Fatal(err)
	}
	s.Threads = 2
	if err := in.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if m, th := setting("memory_limit"), setting("threads"); m != "190.7 MiB" || th != "2" {
		t.Fatalf("memory_limit %s, threads %s; want 190.7 MiB (left alone) and 2 (changed)", m, th)
	}
	if err := in.Apply(ctx, engine.Settings{MemoryLimit: "not a size"}); err == nil {
		t.Fatal("a bad memory_limit was applied")
	}
	if err := in.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if m := setting("memory_limit"); m != "286.1 MiB" {
		t.Fatalf("memory_limit %s after a failed Apply; want 286.1 MiB set again", m)
	}
}
