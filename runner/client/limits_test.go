package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/protocol"
)

// The limits a job is given (DuckDB's memory_limit, threads, max_temp_directory_size) hold for
// its own SQL: once the sandbox is closed, SET and RESET of them are refused, and the values seen
// inside the job are the ones given.
func TestJobSQLCannotRaiseItsLimits(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationPlain})
	base := client.Job{MemoryLimit: "300MB", Threads: 1, DiskCap: 64 << 20, Sandbox: &protocol.Sandbox{}}
	for _, st := range []string{
		"SET memory_limit = '100TB'", "SET GLOBAL memory_limit = '100TB'", "RESET memory_limit",
		"SET threads = 64", "PRAGMA threads = 64", "SET max_temp_directory_size = '1TB'",
		"SET temp_directory = '/tmp/elsewhere'",
	} {
		job := base
		job.Blocks = []string{st}
		_, err := c.Run(context.Background(), job)
		var je *client.JobError
		if !errors.As(err, &je) || !strings.Contains(err.Error(), "lock_configuration") && !strings.Contains(err.Error(), "locked") {
			t.Fatalf("%s: %v; want the locked-configuration refusal", st, err)
		}
	}
	job := base
	job.Blocks = []string{"SELECT current_setting('memory_limit'), current_setting('threads'), current_setting('max_temp_directory_size')"}
	res, err := c.Run(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join([]string{string(res.Results[0].Rows[0][0]), string(res.Results[0].Rows[0][1]), string(res.Results[0].Rows[0][2])}, " ")
	if got != `"286.1 MiB" 1 "64.0 MiB"` {
		t.Fatalf("settings inside the job: %s", got)
	}
	assertEmptyDir(t, root)
}

// DuckDB's memory_limit stops a job that needs more memory than it may spill, with DuckDB's out
// of memory error; the next job runs.
func TestMemoryLimitStopsTheJob(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationPlain})
	_, err := c.Run(context.Background(), client.Job{MemoryLimit: "64MB", Threads: 1, Sandbox: &protocol.Sandbox{},
		Blocks: []string{"SELECT len(list(range)) FROM range(60000000)"}})
	var je *client.JobError
	if !errors.As(err, &je) || !strings.Contains(je.Message, "Out of Memory Error") {
		t.Fatalf("error %v; want DuckDB's out of memory error", err)
	}
	assertNextJobRuns(t, c, root)
}

// With a cgroup parent, each runner gets a memory cgroup of its own whose limit is the job's
// MemoryMax: a job whose DuckDB limit is far above it is ended by the kernel inside its cgroup,
// with a LimitError naming the memory limit; no cgroup is left behind, and the next job runs.
func TestCgroupMemoryLimitEndsTheJob(t *testing.T) {
	own, err := client.OwnMemoryCgroup()
	if err != nil {
		t.Fatalf("this machine lets no child memory cgroup be made: %v", err)
	}
	// A parent of the test's own: other packages' runners come and go under own meanwhile.
	parent := filepath.Join(own, "dataenv-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatalf("make the test's memory cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(parent) })
	cgroups := func() string {
		left, _ := filepath.Glob(filepath.Join(parent, "dataenv-runner-*"))
		return strings.Join(left, " ")
	}
	before := cgroups()
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			c, root := newClient(t, client.Config{Isolation: mode, CgroupParent: parent})
			_, err := c.Run(context.Background(), client.Job{MemoryLimit: "20GB", MemoryMax: 256 << 20, Blocks: []string{
				"SET preserve_insertion_order = false",
				"SELECT len(list(range)) FROM range(300000000)",
			}})
			var le *client.LimitError
			if !errors.As(err, &le) || le.Limit != client.LimitMemory || !strings.Contains(err.Error(), "256 MB") {
				t.Fatalf("error %v; want the memory limit of 256 MB", err)
			}
			assertNextJobRuns(t, c, root)
			if after := cgroups(); after != before {
				t.Fatalf("cgroups left behind: %s (before the test: %s)", after, before)
			}
		})
	}
}

// Bytes a job writes into a watched directory (a local lake path) count toward its disk cap with
// its spill: past it the job is stopped with the disk limit's error, and no process remains.
func TestDiskCapCountsWritesIntoLakePaths(t *testing.T) {
	for _, mode := range []client.Isolation{client.IsolationPlain, client.IsolationJailed} {
		t.Run(string(mode), func(t *testing.T) {
			lake := t.TempDir()
			if err := os.WriteFile(filepath.Join(lake, "existing"), make([]byte, 8<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			c, root := newClient(t, client.Config{Isolation: mode, SpillPoll: 20 * time.Millisecond})
			var pgid int
			_, err := c.Run(context.Background(), client.Job{DiskCap: 32 << 20, WatchDirs: []string{lake},
				Mounts:  []client.Mount{{Path: lake, Writable: true}},
				Sandbox: &protocol.Sandbox{AllowedDirectories: []string{lake + "/"}},
				Started: func(p int) { pgid = p },
				Blocks: []string{
					"COPY (SELECT range, repeat('x', 200) AS pad FROM range(20000000)) TO " + sqlString(filepath.Join(lake, "big.csv")),
				}})
			var se *client.SpillError
			if !errors.As(err, &se) || se.Watched == 0 || !strings.Contains(err.Error(), "local lake paths") {
				t.Fatalf("error %v; want the disk limit counting the lake writes", err)
			}
			// A jail's inner processes die after the wrapper Run waited for (the PID namespace ends).
			eventually(t, 30*time.Second, "every process of the stopped job is gone", func() bool { return len(group(pgid)) == 0 })
			assertEmptyDir(t, root)
		})
	}
}

// DiskCap is DuckDB's max_temp_directory_size too: a sorting job past it fails with DuckDB's
// error before the watchdog has to kill it.
func TestDiskCapBoundsDuckDBSpill(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationPlain})
	_, err := c.Run(context.Background(), client.Job{MemoryLimit: "100MB", Threads: 1, DiskCap: 48 << 20, Sandbox: &protocol.Sandbox{},
		Blocks: []string{"SELECT count(*) FROM (SELECT range, md5(range::VARCHAR) m FROM range(5000000) ORDER BY m)"}})
	var je *client.JobError
	if !errors.As(err, &je) || !strings.Contains(je.Message, "max_temp_directory_size") {
		t.Fatalf("error %v; want DuckDB's temp directory limit", err)
	}
	assertEmptyDir(t, root)
}

// A spare sets the limits its job usually asks for (Config.SpareJob) before the job arrives: a job
// asking for those runs with them, one asking for others with its own, and either way its SQL
// cannot change them.
func TestSparesSetTheUsualLimitsAhead(t *testing.T) {
	c, _ := newClient(t, client.Config{Isolation: client.IsolationPlain, WarmSpares: 1,
		SpareJob: client.SpareJob{MemoryLimit: "300MB", Threads: 1, DiskCap: 64 << 20}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	show := "SELECT current_setting('memory_limit'), current_setting('threads'), current_setting('max_temp_directory_size'), " +
		"current_setting('temp_directory')"
	for _, tc := range []struct {
		job  client.Job
		want string
	}{
		{client.Job{MemoryLimit: "300MB", Threads: 1, DiskCap: 64 << 20}, `"286.1 MiB" 1 "64.0 MiB"`},
		{client.Job{MemoryLimit: "200MB", Threads: 2, DiskCap: 32 << 20}, `"190.7 MiB" 2 "32.0 MiB"`},
	} {
		if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
			t.Fatal(err)
		}
		job := tc.job
		job.Sandbox, job.Blocks = &protocol.Sandbox{}, []string{show}
		res, err := c.Run(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		row := res.Results[0].Rows[0]
		got := strings.Join([]string{string(row[0]), string(row[1]), string(row[2])}, " ")
		if !res.Warm || got != tc.want || !strings.HasSuffix(string(row[3]), `/spill"`) {
			t.Fatalf("job %+v: warm %v, settings %s, temp_directory %s; want a spare with %s", tc.job, res.Warm, got, row[3], tc.want)
		}
		job.Blocks = []string{"SET memory_limit = '100TB'"}
		if err := c.Prewarm(ctx, client.IsolationPlain); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Run(ctx, job); err == nil || !strings.Contains(err.Error(), "lock") {
			t.Fatalf("job %+v raised its memory limit on a spare: %v", tc.job, err)
		}
	}
}
