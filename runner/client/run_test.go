package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
)

func TestRunReturnsRowsInColumnOrder(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			res, err := c.Run(context.Background(), client.Job{
				Blocks: []string{
					"LOAD ducklake",
					"SELECT 2 AS z, getvariable('who') AS a, 1 AS m UNION ALL SELECT 3, 'b', 0 ORDER BY z",
				},
				Args:            map[string]any{"who": "dataenv"},
				CollectLastOnly: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Isolation != mode {
				t.Fatalf("isolation %s, want %s", res.Isolation, mode)
			}
			r := res.Results[0]
			var names []string
			for _, col := range r.Columns {
				names = append(names, col.Name)
			}
			if got := strings.Join(names, ","); got != "z,a,m" {
				t.Fatalf("columns %s, want z,a,m", got)
			}
			if got := string(r.Rows[0][1]) + string(r.Rows[1][0]); got != `"dataenv"3` {
				t.Fatalf("rows %s", got)
			}
			assertEmptyDir(t, root)
		})
	}
}

func TestSQLErrorNamesTheBlock(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationPlain})
	_, err := c.Run(context.Background(), client.Job{Blocks: []string{"SELECT 1", "SELECT * FROM no_such_table"}})
	var je *client.JobError
	if !errors.As(err, &je) || je.Block != 1 || !strings.Contains(err.Error(), "no_such_table") {
		t.Fatalf("error %v; want a JobError for block 2 naming no_such_table", err)
	}
	assertEmptyDir(t, root)
}

func TestResultIsBounded(t *testing.T) {
	c, _ := newClient(t, client.Config{Isolation: client.IsolationPlain})
	res, err := c.Run(context.Background(), client.Job{
		Blocks: []string{"SELECT range AS i, repeat('x', 100) AS pad FROM range(100000)"}, MaxResultBytes: 10000,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Results[0]
	if !r.Truncated || len(r.Rows) == 0 || len(r.Rows) > 100 {
		t.Fatalf("truncated %v with %d rows; want a truncated result under 10000 bytes", r.Truncated, len(r.Rows))
	}
}

// Every process of the runner's group (wrappers included) has only PATH, HOME, TZ and the
// proxy variables of the sidecar's environment, and exactly the configured oom_score_adj, even
// when it inherits a higher one; and nothing outside the group has its score changed (choom in
// a PID namespace once wrote to /proc/1, the machine's init).
func TestEnvironmentClearedAndOOMScoreRaised(t *testing.T) {
	t.Setenv("DATAENV_TEST_SECRET", "do-not-leak")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:9")
	inheritOOMScore(t, 900)
	initScore := readOOMScore(t, 1)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			defer func() {
				if got := readOOMScore(t, 1); got != initScore {
					writeOOMScore(1, initScore)
					t.Errorf("pid 1's oom_score_adj changed from %s to %s", initScore, got)
				}
			}()
			c, root := newClient(t, client.Config{Isolation: mode, OOMScoreAdj: 777})
			job := started(t, c, root, client.Job{Blocks: []string{longQuery}})
			defer job.stop()
			pgid := job.pgid
			eventually(t, 10*time.Second, "every group member has oom_score_adj 777", func() bool {
				for _, p := range group(pgid) {
					adj, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", p.pid))
					if strings.TrimSpace(string(adj)) != "777" {
						return false
					}
				}
				return true
			})
			for _, p := range group(pgid) {
				env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
				if err != nil {
					continue
				}
				if !strings.Contains(string(env), "HTTPS_PROXY=http://127.0.0.1:9") {
					t.Errorf("%v: proxy variable not passed on", p.argv)
				}
				for _, kv := range strings.Split(strings.Trim(string(env), "\x00"), "\x00") {
					switch k, _, _ := strings.Cut(kv, "="); k {
					case "PATH", "HOME", "TZ", "HTTPS_PROXY", "DATAENV_RUNNER_TEST_HOOKS":
					case "PWD": // bubblewrap sets it to the jail's /work
					default:
						t.Errorf("%v: environment has %s", p.argv, kv)
					}
				}
			}
		})
	}
}

func TestRunnerPathFromEnvironment(t *testing.T) {
	t.Setenv(client.EnvRunnerPath, runnerPath)
	p, err := client.RunnerPath()
	if err != nil || p != runnerPath {
		t.Fatalf("RunnerPath() = %q, %v", p, err)
	}
	t.Setenv(client.EnvRunnerPath, "")
	_, err = client.RunnerPath()
	if _, statErr := os.Stat(p); err == nil && statErr != nil {
		t.Fatal("RunnerPath found a runner next to the test binary that does not exist")
	}
}

// inheritOOMScore gives this process (and so every runner it starts) oom_score_adj adj until
// the test ends. Lowering it back needs root; elsewhere the test keeps what it has.
func inheritOOMScore(t *testing.T, adj int) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	own := readOOMScore(t, os.Getpid())
	if err := writeOOMScore(os.Getpid(), strconv.Itoa(adj)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writeOOMScore(os.Getpid(), own) })
}

func readOOMScore(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func writeOOMScore(pid int, adj string) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(adj), 0)
}
