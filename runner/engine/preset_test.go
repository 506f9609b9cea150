package engine_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// A spare sets the sandbox's job-independent settings before its job arrives; a job without a
// sandbox that lands on it runs with DuckDB's defaults all the same.
func TestPresetSandboxIsUndoneForAJobWithoutOne(t *testing.T) {
	ctx := context.Background()
	const q = `SELECT current_setting('autoinstall_known_extensions')::VARCHAR || ' ' ||
		current_setting('s3_url_compatibility_mode')::VARCHAR || ' ' || current_setting('allowed_configs')::VARCHAR`
	value := func(in *engine.Instance) string {
		resp := engine.RunOn(ctx, in, &protocol.Request{Blocks: []string{q}}, nil)
		if resp.Error != "" {
			t.Fatal(resp.Error)
		}
		return string(resp.Results[0].Rows[0][0])
	}
	defaults := value(openInstance(t))
	spare := openInstance(t)
	if err := spare.PresetSandbox(ctx); err != nil {
		t.Fatal(err)
	}
	var preset string
	if err := spare.Conn.QueryRowContext(ctx, q).Scan(&preset); err != nil {
		t.Fatal(err)
	}
	if want := "false true [TimeZone]"; preset != want {
		t.Fatalf("a spare's settings ahead of its job: %s; want %s", preset, want)
	}
	if got := value(spare); got != defaults {
		t.Fatalf("a job without a sandbox on a spare sees %s; want DuckDB's defaults %s", got, defaults)
	}
}
