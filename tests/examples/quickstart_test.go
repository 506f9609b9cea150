package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/devtest"
)

// psql runs the real psql on dsn with input from file (or stdin when file is "-"), from the
// repository root, and returns its exit error and everything it printed.
func psql(t *testing.T, dsn, file, stdin string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "psql", dsn, "-X", "--no-psqlrc", "-f", file)
	cmd.Dir = repoRoot()
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "PGOPTIONS=", "PSQLRC=/dev/null")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// startDev starts a fresh dataenv dev in a directory of the test.
func startDev(t *testing.T) *devtest.Process {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".dataenv")
	t.Cleanup(func() { devtest.RemoveRelocated(dir) })
	// info: a request that never runs shows why in the sidecar's log, printed when a test fails.
	p := devtest.Start(t, dir, "--http-addr", "127.0.0.1:0", "--log-level", "info")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dataenv dev output:\n%s", tail(p.Out.String(), 200))
		}
	})
	return p
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

var unfinished = regexp.MustCompile(`(?m)^\s*(failed|cancelled|pending|running)\s+\|`)

// examples/quickstart.sql runs end to end as written, twice (it cleans up after itself), with
// the results it promises: joins that return rows, a fork that reads the parent's orders and
// appends to them, a parent that does not change.
func TestQuickstart(t *testing.T) {
	dev := startDev(t)
	file, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "quickstart.sql"))
	if err != nil {
		t.Fatal(err)
	}
	waits := strings.Count(string(file), "FROM dataenv.wait(")
	for run := 1; run <= 2; run++ {
		out, err := psql(t, dev.DSN, "examples/quickstart.sql", "")
		if err != nil {
			t.Fatalf("run %d: psql -f examples/quickstart.sql: %v\n%s", run, err, out)
		}
		if m := unfinished.FindString(out); m != "" {
			t.Fatalf("run %d: a request did not succeed (%q):\n%s", run, m, out)
		}
		if n := len(regexp.MustCompile(`(?m)^\s*succeeded\s+\|`).FindAllString(out, -1)); n != waits {
			t.Fatalf("run %d: %d requests succeeded, the file waits for %d:\n%s", run, n, waits, out)
		}
		for _, want := range []string{
			`[["Ada", 100, 3970], ["Edsger", 100, 4010], ["Grace", 100, 3990]]`, // the join in shop
			`orders     | deferred | shop`,                                      // the fork reads shop's orders
			`"total_rows": 320`,                                                 // append in the fork starts from shop's rows
			`orders     | fork-materialized |`,                                  // and the fork owns its table since
			`[["NL", 100, 4010], ["UK", 100, 3970], ["US", 120, 4490]]`,         // the fork's join sees Barbara
			`"rows": [[300, 3]]`,                                                // shop is unchanged
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("run %d: the output lacks %s:\n%s", run, want, out)
			}
		}
	}
}
