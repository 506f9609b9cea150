package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dataenv/dataenv/sidecar/procguard"
)

const portAttempts = 5

// startThrowaway creates a fresh cluster directory, runs initdb and starts the postmaster as a
// child in its own process group. A guard removes the directory (and, once the server runs, its
// process group) if this process dies before Stop.
func (c *Cluster) startThrowaway(ctx context.Context, cfg Config) (err error) {
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp(c.runAs.tempParent(), "dataenv-pg-"+cfg.name()+"-"); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
	} else if entries, rerr := os.ReadDir(dir); rerr == nil && len(entries) > 0 {
		return fmt.Errorf("localpg: throwaway cluster directory %s is not empty", dir)
	}
	guard, err := procguard.Start(0, dir)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	defer func() {
		if err != nil {
			_ = guard.Fire()
		}
	}()
	if err = c.prepareDir(dir); err != nil {
		return err
	}
	if c.SocketDir != filepath.Join(dir, "sock") { // the socket lives elsewhere: guard it too
		wider, gerr := procguard.Start(0, dir, c.SocketDir)
		if gerr != nil {
			os.RemoveAll(c.SocketDir)
			return gerr
		}
		_ = guard.Disarm()
		guard = wider
	}
	if err = c.initdb(ctx, cfg); err != nil {
		return err
	}
	if err = c.spawnWithPortRetry(ctx, cfg.Port); err != nil {
		return err
	}
	// Re-arm: the new guard also kills the server's process group.
	c.guard, err = procguard.Start(c.cmd.Process.Pid, dir, c.SocketDir)
	if err != nil {
		c.killServer()
		return err
	}
	_ = guard.Disarm()
	c.logger.Info("postgres started", "port", c.port, "dir", dir, "major", c.Major)
	return nil
}

// spawnWithPortRetry starts the postmaster; with port 0 it retries on another free port when the
// chosen one was taken in the meantime (parallel test packages race for ports).
func (c *Cluster) spawnWithPortRetry(ctx context.Context, port int) error {
	var lastErr error
	for attempt := 0; attempt < portAttempts; attempt++ {
		p := port
		if p == 0 {
			var err error
			if p, err = FreePort(); err != nil {
				return err
			}
		}
		offset := logSize(c.LogFile)
		err := c.spawn(ctx, p)
		if err == nil {
			return nil
		}
		lastErr = err
		if port != 0 || !errors.Is(err, errServerExited) || !bindFailure(c.logTail(offset)) {
			return err
		}
		c.logger.Info("port taken, retrying", "port", p)
	}
	return lastErr
}

// spawn starts the postmaster on port and waits until it accepts connections.
func (c *Cluster) spawn(ctx context.Context, port int) error {
	c.port = port
	logf, err := os.OpenFile(c.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	defer logf.Close()
	// Not bound to ctx: the server outlives Start; Stop ends it.
	cmd := c.runAs.command(context.WithoutCancel(ctx), c.Dir, filepath.Join(c.binDir, "postgres"),
		"-D", c.inner(c.DataDir), "-p", strconv.Itoa(port), "-k", c.inner(c.SocketDir))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("localpg: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.cmd, c.exited = cmd, exited
	offset := logSize(c.LogFile)
	if err := c.waitReady(ctx, exited); err != nil {
		if errors.Is(err, errServerExited) {
			return fmt.Errorf("%w (port %d): %s", err, port, c.logTail(offset))
		}
		c.killServer()
		return err
	}
	return nil
}

// stopThrowaway asks for a fast shutdown (SIGINT, what pg_ctl stop -m fast sends), kills the
// process group when that does not finish in time, and removes the directory.
func (c *Cluster) stopThrowaway(ctx context.Context) error {
	var errs []error
	if c.cmd != nil {
		errs = append(errs, c.shutdownChild(ctx, syscall.SIGINT))
	}
	errs = append(errs, os.RemoveAll(c.Dir))
	if c.SocketDir != filepath.Join(c.Dir, "sock") {
		errs = append(errs, os.RemoveAll(c.SocketDir))
	}
	if c.guard != nil {
		errs = append(errs, c.guard.Disarm())
	}
	c.logger.Info("postgres stopped", "port", c.port)
	return errors.Join(errs...)
}

// killServer SIGKILLs the postmaster and its children and waits until they are gone. Backends
// run in sessions of their own (postgres calls setsid in each child), so the postmaster is
// stopped first, its children are killed, then the postmaster's process group.
func (c *Cluster) killServer() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP) // no new children from here on
	kids := childrenOf(pid)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	signalGroup(pid, syscall.SIGKILL)
	<-c.exited
	// A new postmaster on this data directory refuses to start while an old backend still holds
	// the shared memory segment.
	deadline := time.Now().Add(30 * time.Second)
	for anyAlive(kids) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// procStat is what killServer needs from /proc/<pid>/stat.
type procStat struct {
	pid, ppid int
	zombie    bool
}

// processes lists the processes in /proc (nothing without /proc).
func processes() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			out = append(out, st)
		}
	}
	return out
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp ...
	if len(f) < 2 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{pid: pid, ppid: ppid, zombie: f[0] == "Z" || f[0] == "X"}, true
}

func childrenOf(pid int) []int {
	var kids []int
	for _, p := range processes() {
		if p.ppid == pid {
			kids = append(kids, p.pid)
		}
	}
	return kids
}

func anyAlive(pids []int) bool {
	for _, pid := range pids {
		if st, ok := readStat(pid); ok && !st.zombie {
			return true
		}
	}
	return false
}

// Stop stops the server. Throwaway clusters are then removed; persistent ones keep their
// directory. Calling Stop again returns the first call's result.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.isStopped.Store(true)
		if c.persistent {
			c.stopErr = c.stopPersistent(ctx)
		} else {
			c.stopErr = c.stopThrowaway(ctx)
		}
	})
	return c.stopErr
}

// PID is the postmaster's process id (0 when unknown).
func (c *Cluster) PID() int {
	if c.cmd != nil && c.cmd.Process != nil {
		return c.cmd.Process.Pid
	}
	if pm, err := readPostmasterPID(c.DataDir); err == nil {
		return pm.pid
	}
	return 0
}
