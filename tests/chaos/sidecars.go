package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// sidecars runs the sidecar processes: the shipped binary, each with a log file of its own in
// the run directory.
type sidecars struct {
	h     *harness
	mu    sync.Mutex
	procs map[int]*proc // by pid, alive
	seq   int
	logs  []string
	// exited counts sidecars that exited on their own (never killed by the harness): a sidecar
	// must ride out every fault, so the run is not clean when any did.
	exited int
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func newSidecars(h *harness) *sidecars { return &sidecars{h: h, procs: map[int]*proc{}} }

// start runs one more sidecar.
func (s *sidecars) start() error {
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.mu.Unlock()
	path := filepath.Join(s.h.dir, fmt.Sprintf("sidecar-%04d.log", n))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.h.dataenv, "sidecar", "--dsn", s.h.pg.DSN(controlDB), "--http-addr", "-",
		"--log-level", "info", "--job-isolation", "plain", "--runner-path", s.h.runner)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	s.mu.Lock()
	s.procs[cmd.Process.Pid] = p
	s.logs = append(s.logs, path)
	s.mu.Unlock()
	return nil
}

// ensure starts sidecars until n are alive.
func (s *sidecars) ensure(n int) error {
	s.reap()
	for s.alive() < n {
		if err := s.start(); err != nil {
			return err
		}
	}
	return nil
}

func (s *sidecars) alive() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.procs)
}

// reap forgets processes that exited.
func (s *sidecars) reap() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, p := range s.procs {
		select {
		case <-p.done:
			delete(s.procs, pid)
			s.exited++
			s.h.opts.Logf("sidecar pid %d exited on its own", pid)
		default:
		}
	}
}

// kill SIGKILLs the sidecar pid (one of ours) and waits until it is gone.
func (s *sidecars) kill(pid int) bool {
	s.mu.Lock()
	p, ok := s.procs[pid]
	delete(s.procs, pid)
	s.mu.Unlock()
	if !ok {
		return false
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return true
}

// others are the live sidecars except pid.
func (s *sidecars) others(pid int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for p := range s.procs {
		if p != pid {
			out = append(out, p)
		}
	}
	return out
}

func (s *sidecars) stopAll() {
	s.mu.Lock()
	var ps []*proc
	for _, p := range s.procs {
		ps = append(ps, p)
	}
	s.procs = map[int]*proc{}
	s.mu.Unlock()
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// leaderSQL finds the sidecar holding the leader lock (by its session's name, see
// sidecar/internal/fence) and whether it streams from the slot.
const leaderSQL = `
WITH s AS (SELECT pid, 'dataenv/' || substr(replace(instance_id::text, '-', ''), 1, 12) AS tag FROM dataenv.sidecars)
SELECT s.pid,
       EXISTS (SELECT FROM pg_replication_slots r JOIN pg_stat_activity w ON w.pid = r.active_pid
                WHERE r.slot_name = dataenv.slot_name() AND w.application_name = s.tag || '/replication')
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid JOIN s ON a.application_name = s.tag || '/leader'
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
   AND l.classid = dataenv.lock_class('leader')::oid
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// leader returns the pid of the leading sidecar (0 when none) and whether it is streaming.
func (s *sidecars) leader(ctx context.Context) (pid int, ready bool, err error) {
	err = s.h.pool.QueryRow(ctx, leaderSQL).Scan(&pid, &ready)
	if err != nil && strings.Contains(err.Error(), "no rows") {
		return 0, false, nil
	}
	return pid, ready, err
}

// waitReady waits until a live sidecar of ours leads and streams, up to timeout; it returns the
// leader's pid (0 on timeout).
func (s *sidecars) waitReady(ctx context.Context, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pid, ready, err := s.leader(ctx)
		if err == nil && ready && s.isOurs(pid) {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}

func (s *sidecars) isOurs(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.procs[pid]
	return ok
}

// scanLogs counts lines containing each needle across every sidecar log of the run.
func (s *sidecars) scanLogs(needles ...string) map[string]int {
	s.mu.Lock()
	paths := append([]string(nil), s.logs...)
	s.mu.Unlock()
	out := map[string]int{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, n := range needles {
				if strings.Contains(line, n) {
					out[n]++
				}
			}
		}
	}
	return out
}

// exitedOnTheirOwn is how many sidecars exited without being killed.
func (s *sidecars) exitedOnTheirOwn() int {
	s.reap()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exited
}
