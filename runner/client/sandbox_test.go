package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/protocol"
)

// A sandboxed job, in every isolation mode, reaches its mounts and its own scratch directory
// (/tmp in a jail) and no other file of the host, even where no jail hides them (plain, unshare).
func TestSandboxedJobSeesOnlyItsDirectories(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "sidecar-secret.csv")
	if err := os.WriteFile(secret, []byte("v\nhunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lake := t.TempDir()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			job := client.Job{
				Mounts:  []client.Mount{{Path: lake, Writable: true}},
				Sandbox: &protocol.Sandbox{AllowedDirectories: []string{lake + "/"}},
				Setup:   []string{"CREATE TEMP TABLE seed AS SELECT 42 AS x"},
				Blocks: []string{
					"COPY (SELECT x FROM seed) TO " + sqlString(filepath.Join(lake, string(mode)+".csv")),
					"COPY (SELECT 1 AS y) TO 'tmp/scratch.csv'",
					"SELECT (SELECT x FROM " + sqlString(filepath.Join(lake, string(mode)+".csv")) + ") + (SELECT y FROM 'tmp/scratch.csv')",
				},
				CollectLastOnly: true,
			}
			res, err := c.Run(context.Background(), job)
			if err != nil {
				t.Fatalf("sandboxed job: %v", err)
			}
			if got := string(res.Results[0].Rows[0][0]); got != "43" {
				t.Fatalf("read back %s, want 43", got)
			}
			for _, q := range []string{
				"SELECT * FROM read_csv(" + sqlString(secret) + ")",
				"COPY (SELECT 1) TO 'in-work-root.csv'",
			} {
				_, err = c.Run(context.Background(), client.Job{Sandbox: &protocol.Sandbox{}, Blocks: []string{q}})
				var je *client.JobError
				if !errors.As(err, &je) || !strings.Contains(err.Error(), "disabled by configuration") || strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("%s: %v; want DuckDB's sandbox refusal", q, err)
				}
			}
			assertEmptyDir(t, root)
		})
	}
}

// A warm spare sets the part of the sandbox that is the same for every job before its job
// arrives: the job on it is confined and locked all the same, and a job without a sandbox on a
// spare runs with DuckDB's defaults.
func TestSandboxOnAWarmSpare(t *testing.T) {
	c, _ := newClient(t, client.Config{Isolation: client.IsolationPlain, WarmSpares: 1})
	ctx := context.Background()
	settings := `SELECT current_setting('autoinstall_known_extensions')::VARCHAR || ' ' ||
		current_setting('s3_url_compatibility_mode')::VARCHAR || ' ' || current_setting('allowed_configs')::VARCHAR || ' ' ||
		current_setting('lock_configuration')::VARCHAR`
	for _, tc := range []struct {
		sandbox *protocol.Sandbox
		want    string
	}{
		{&protocol.Sandbox{}, "false true [TimeZone] true"},
		{nil, "true false [] false"},
	} {
		if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
			t.Fatal(err)
		}
		res, err := c.Run(ctx, client.Job{Sandbox: tc.sandbox, Blocks: []string{settings}})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Results[0].Rows[0][0]); !res.Warm || got != `"`+tc.want+`"` {
			t.Fatalf("sandbox %v: warm %v, settings %s; want a warm runner with %s", tc.sandbox, res.Warm, got, tc.want)
		}
	}
	_, err := c.Run(ctx, client.Job{Sandbox: &protocol.Sandbox{}, Blocks: []string{"SET autoinstall_known_extensions = true"}})
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("a spare's job turning autoinstall back on: %v; want the locked configuration's refusal", err)
	}
}
