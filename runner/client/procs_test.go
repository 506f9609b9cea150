package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/runner/client"
)

// longQuery keeps DuckDB busy until it is killed.
const longQuery = "SELECT sum(hash(i)) FROM range(10000000000000) t(i)"

// proc is a live (not zombie) process of a runner's process group.
type proc struct {
	pid  int
	argv []string
}

// group lists the live members of process group pgid, from /proc.
func group(pgid int) []proc {
	var out []proc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the last ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		cmdline, _ := os.ReadFile(d + "/cmdline")
		out = append(out, proc{pid: pid, argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")})
	}
	return out
}

// isRunner tells the runner itself from its wrappers (choom, unshare, bwrap).
func (p proc) isRunner() bool {
	return len(p.argv) > 0 && filepath.Base(p.argv[0]) == client.RunnerName
}

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running is a job started in the background.
type running struct {
	pgid    int
	members []proc
	cancel  context.CancelFunc
	errCh   chan error
}

// wait returns Run's error.
func (r *running) wait() error { return <-r.errCh }

// stop cancels the job and returns Run's error.
func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// started runs job (a long one) in the background and returns once its last block is running:
// a marker block ahead of it writes started.csv into the job's work directory under root.
func started(t *testing.T, c *client.Client, root string, job client.Job) *running {
	t.Helper()
	job.Blocks = append(append(append([]string(nil), job.Blocks[:len(job.Blocks)-1]...),
		"COPY (SELECT 1 AS started) TO 'started.csv'"), job.Blocks[len(job.Blocks)-1])
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	var pgid int
	var members []proc
	pgidCh := make(chan int, 1)
	job.Started = func(pgid int) { pgidCh <- pgid }
	errCh := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, job)
		errCh <- err
	}()
	select {
	case pgid = <-pgidCh:
	case err := <-errCh:
		stop()
		t.Fatalf("job ended before it started: %v", err)
	}
	eventually(t, 30*time.Second, "the job's last block is running", func() bool {
		markers, _ := filepath.Glob(filepath.Join(root, "job-*", "started.csv"))
		return len(markers) > 0
	})
	members = group(pgid)
	return &running{pgid: pgid, members: members, cancel: stop, errCh: errCh}
}

// threadsOf lists the thread ids of process pid.
func threadsOf(pid int) []int {
	var out []int
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*", pid))
	for _, d := range dirs {
		if tid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			out = append(out, tid)
		}
	}
	return out
}

// niceOf is the nice value of thread tid of process pid (-100 when it cannot be read).
func niceOf(pid, tid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return -100
	}
	// Field 19 is the nice value; fields are counted from the state (field 3) after the last ')'.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(f) < 17 {
		return -100
	}
	n, err := strconv.Atoi(f[16])
	if err != nil {
		return -100
	}
	return n
}
