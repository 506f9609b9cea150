package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/protocol"
)

// A job that spills past the cap is stopped by the watchdog, with the cap message, and its work
// directory is removed. DuckDB's own max_temp_directory_size, raised by the script, does not help.
func TestSpillPastCapIsStopped(t *testing.T) {
	for _, mode := range []client.Isolation{client.IsolationPlain, client.IsolationJailed} {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode, SpillCap: 64 << 20, SpillPoll: 50 * time.Millisecond})
			_, err := c.Run(context.Background(), client.Job{
				MemoryLimit: "100MB", Threads: 1,
				Blocks: []string{
					"SET max_temp_directory_size = '100GB'",
					"SET preserve_insertion_order = false",
					"SELECT count(*) FROM (SELECT i, md5(i::VARCHAR) || md5((i + 1)::VARCHAR) AS s FROM range(40000000) t(i) ORDER BY s)",
				},
			})
			var spill *client.SpillError
			if !errors.As(err, &spill) {
				t.Fatalf("error %v; want the spill cap error", err)
			}
			if !strings.Contains(err.Error(), "past the spill cap of 64 MB") || !strings.Contains(err.Error(), "Spill less") {
				t.Fatalf("message %q does not say what happened and what to do", err)
			}
			assertEmptyDir(t, root)
		})
	}
}

// Cancelling the job's context during a long query kills the runner and every process of its
// group (bubblewrap and its init included) within a couple of seconds.
func TestCancelKillsTheWholeGroup(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			job := started(t, c, root, client.Job{Blocks: []string{longQuery}})
			pgid, members := job.pgid, job.members
			if mode == client.IsolationJailed && len(members) < 2 {
				t.Fatalf("group %d: %v; want the wrapper and the runner", pgid, members)
			}
			err := job.stop()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v; want context.Canceled", err)
			}
			eventually(t, 2*time.Second, "every process of the runner's group is gone", func() bool {
				for _, p := range members {
					if err := syscall.Kill(p.pid, 0); err == nil && !isZombie(p.pid) {
						return false
					}
				}
				return len(group(pgid)) == 0
			})
			assertEmptyDir(t, root)
		})
	}
}

// A job past its timeout is stopped the same way, with an error that says so.
func TestTimeoutStopsTheJob(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationJailed})
	_, err := c.Run(context.Background(), client.Job{Blocks: []string{longQuery}, Timeout: 300 * time.Millisecond})
	var le *client.LimitError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &le) || le.Limit != client.LimitTimeout || !strings.Contains(err.Error(), "timeout of 300ms") {
		t.Fatalf("error %v; want the timeout", err)
	}
	assertEmptyDir(t, root)
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// A job that prints hundreds of MB: the client keeps a bounded tail and its memory stays flat.
func TestHugeOutputKeepsABoundedTail(t *testing.T) {
	const each = 300 << 20
	c, _ := newClient(t, client.Config{Isolation: client.IsolationPlain, OutputTail: 4096})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := c.Run(context.Background(), client.Job{
		Blocks:   []string{"SELECT 1 AS x"},
		TestHook: &protocol.TestHook{AfterBlock: 1, Print: each},
	})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if res.StdoutBytes < each || res.StderrBytes < each {
		t.Fatalf("the runner printed %d + %d bytes; want at least %d each", res.StdoutBytes, res.StderrBytes, each)
	}
	if len(res.Stdout) > 4096 || !strings.HasSuffix(res.Stdout, "end of stdout\n") || !strings.HasSuffix(res.Stderr, "end of stderr\n") {
		t.Fatalf("tails: %d bytes, ending %q / %q", len(res.Stdout), last(res.Stdout, 20), last(res.Stderr, 20))
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Fatalf("the client allocated %d MB while the runner printed %d MB", grew>>20, 2*each>>20)
	}
}

// DuckDB itself writing a big result to its stdout goes through the same bounded tail.
func TestDuckDBWritingToStdoutIsBounded(t *testing.T) {
	c, _ := newClient(t, client.Config{Isolation: client.IsolationJailed, OutputTail: 1024})
	res, err := c.Run(context.Background(), client.Job{Blocks: []string{
		"COPY (SELECT repeat('y', 1000) AS line FROM range(50000)) TO '/dev/stdout' (HEADER false)",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StdoutBytes < 50_000_000 || len(res.Stdout) > 1024 {
		t.Fatalf("stdout: %d bytes written, %d kept", res.StdoutBytes, len(res.Stdout))
	}
}

// The runner killed mid-job by SIGKILL (sent from outside, as the kernel's OOM killer does) or
// dying of SIGSEGV (a real segmentation fault in native code, through a test hook) gives an
// error naming the signal; the next job on the same client succeeds.
func TestRunnerCrashIsAClearErrorAndTheNextJobRuns(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode)+"/SIGKILL", func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			job := started(t, c, root, client.Job{Blocks: []string{"CREATE TABLE t AS SELECT 1 AS x", longQuery}})
			for _, p := range job.members {
				if p.isRunner() {
					syscall.Kill(p.pid, syscall.SIGKILL)
				}
			}
			assertCrash(t, job.wait(), syscall.SIGKILL, "SIGKILL", "out-of-memory")
			assertNextJobRuns(t, c, root)
		})
		t.Run(string(mode)+"/SIGSEGV", func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			_, err := c.Run(context.Background(), client.Job{
				Blocks:   []string{"CREATE TABLE t AS SELECT 1 AS x", "SELECT * FROM t"},
				TestHook: &protocol.TestHook{AfterBlock: 1, Crash: "SIGSEGV"},
			})
			assertCrash(t, err, syscall.SIGSEGV, "SIGSEGV", "crashed")
			assertNextJobRuns(t, c, root)
		})
	}
}

func assertCrash(t *testing.T, err error, sig syscall.Signal, words ...string) {
	t.Helper()
	var crash *client.CrashError
	if !errors.As(err, &crash) || crash.Signal != sig {
		t.Fatalf("error %v; want a CrashError for %v", err, sig)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

func assertNextJobRuns(t *testing.T, c *client.Client, root string) {
	t.Helper()
	res, err := c.Run(context.Background(), client.Job{Blocks: []string{"SELECT 7"}})
	if err != nil || string(res.Results[0].Rows[0][0]) != "7" {
		t.Fatalf("next job: %v", err)
	}
	assertEmptyDir(t, root)
}

// A symlink planted at the result path is refused: nothing is read through it.
func TestSymlinkAtResultPathIsRefused(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"results":[{"block":0,"rows":[["hunter2"]]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []client.Isolation{client.IsolationPlain, client.IsolationJailed} {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode})
			res, err := c.Run(context.Background(), client.Job{
				Blocks:   []string{"SELECT 1"},
				TestHook: &protocol.TestHook{AfterBlock: 1, SymlinkResultTo: secret},
			})
			if !errors.Is(err, client.ErrResultSymlink) || res != nil {
				t.Fatalf("result %v, error %v; want ErrResultSymlink", res, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatal("the error shows the symlink target's content")
			}
			assertEmptyDir(t, root)
		})
	}
}

func last(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
