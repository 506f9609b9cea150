package client_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
)

// memoryCgroup creates a cgroup with a 256 MB memory limit under this process's own memory
// cgroup (v1 memory controller, or v2 with memory enabled), removed at the end of the test.
func memoryCgroup(t *testing.T) string {
	t.Helper()
	const limit = "268435456"
	own := func(controller string) string {
		f, err := os.Open("/proc/self/cgroup")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			parts := strings.SplitN(s.Text(), ":", 3)
			if len(parts) == 3 && parts[1] == controller {
				return parts[2]
			}
		}
		return ""
	}
	var dir, limitFile string
	if p := own("memory"); p != "" {
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", p), "memory.limit_in_bytes"
	} else if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(ctl), "memory") {
		dir, limitFile = filepath.Join("/sys/fs/cgroup", own("")), "memory.max"
	} else {
		t.Fatal("this machine has no memory cgroup controller to run a real OOM kill in")
	}
	dir = filepath.Join(dir, "dataenv-oom-"+strings.ToLower(pg.NamePrefix(t)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(limit), 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A real out-of-memory kill: the runner joins a cgroup limited to 256 MB before exec, DuckDB
// (allowed 20 GB by its own memory_limit) grows past it, and the kernel's OOM killer ends the
// runner. The job fails with an error naming SIGKILL and the OOM killer; the next job runs.
func TestOOMKillIsAClearError(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			cg := memoryCgroup(t)
			c, root := newClient(t, client.Config{Isolation: mode, Cgroup: cg})
			_, err := c.Run(context.Background(), client.Job{MemoryLimit: "20GB", Blocks: []string{
				"SET preserve_insertion_order = false",
				"SELECT len(list(range)) FROM range(300000000)",
			}})
			assertCrash(t, err, syscall.SIGKILL, "SIGKILL", "out-of-memory killer")
			if n := oomKills(cg); n < 1 {
				t.Fatalf("the cgroup counts %d OOM kills; the SIGKILL came from elsewhere", n)
			}
			assertNextJobRuns(t, c, root)
		})
	}
}

// oomKills reads the cgroup's count of OOM kills (v1 memory.oom_control, v2 memory.events).
func oomKills(dir string) int {
	for _, f := range []string{"memory.oom_control", "memory.events"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
	}
	return -1
}
