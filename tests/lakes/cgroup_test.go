package lakes_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sidecarMemoryCgroup is the v1 memory or v2 cgroup directory the sidecar process runs in:
// where it makes its runners' cgroups (--job-cgroup auto). The test fails on a machine without
// a memory cgroup controller: the kernel's limit cannot be tested there.
func sidecarMemoryCgroup(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) != 3:
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			return filepath.Join("/sys/fs/cgroup/memory", parts[2])
		case parts[0] == "0" && parts[1] == "":
			if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(ctl), "memory") {
				return filepath.Join("/sys/fs/cgroup", parts[2])
			}
		}
	}
	t.Fatal("this machine has no memory cgroup controller: the runners' memory cgroups cannot be tested here")
	return ""
}

// hasProcesses reports whether a cgroup has a process in it (one that is gone reads as none).
func hasProcesses(dir string) bool {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return err == nil && len(strings.TrimSpace(string(procs))) > 0
}

// runnerCgroups lists the runner cgroups under dir.
func runnerCgroups(dir string) []string {
	out, _ := filepath.Glob(filepath.Join(dir, "dataenv-runner-*"))
	return out
}

// The memory limit through the sidecar where the machine has memory cgroups: each runner gets a
// cgroup of its own, limited to the job's memory plus headroom. A job whose memory DuckDB does not
// count (one huge string: DuckDB's memory_limit never sees it) grows past the cgroup, the kernel's
// OOM killer ends it, and the request fails with the memory limit's error, where it comes from and
// how to raise it; no process and no runner cgroup is left, and the next job runs.
func TestJobPastItsCgroupMemoryLimit(t *testing.T) {
	e := newEnv(t)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	// No spares: every process under the sidecar, and every runner cgroup, is then a job's.
	e.startSidecar("DATAENV_JOB_WARM_SPARES=0", "DATAENV_JOB_CGROUP=auto", "DATAENV_JOB_THREADS=1")
	cg := sidecarMemoryCgroup(t, e.sidecar.Pid())
	before := runnerCgroups(cg)
	mustExec(t, e.conn, `SELECT dataenv.set_job_limits('prod', memory => '64MB')`)
	// DuckDB's own limit holds for what it counts: its refusal is the same limit's error.
	wantFailure(t, "a job past DuckDB's memory limit", e.runOutcome("prod", `SELECT len(list(range)) FROM range(60000000)`),
		"memory limit of 64 MB", "Out of Memory Error")
	wantFailure(t, "a job past its cgroup", e.runOutcome("prod", `SELECT length(repeat('x', 1500000000))`),
		"memory limit of 64 MB", `set on workspace "prod"`, "out-of-memory killer", "dataenv.set_job_limits('prod', memory =>")
	e.assertNoJobProcess()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, d := range runnerCgroups(cg) {
			// One with a process in it is a live runner of another test's sidecar (a spare
			// waiting for its job: the tests of other packages share this cgroup); this job's
			// runners are gone, and a cgroup of theirs would be empty.
			if !slices.Contains(before, d) && !hasProcesses(d) {
				left = append(left, d)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runner cgroups left after the job: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.run("prod", `SELECT 42`).rowsText(); got != "42" {
		t.Fatalf("the next job: %s", got)
	}
}
