package localpg

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/dataenv/dataenv/sidecar/procguard"
)

// Restart stops the server with a fast shutdown and starts it again on the same port with the
// same data: what a test needs to see clients survive a PostgreSQL restart. After Stop it fails.
func (c *Cluster) Restart(ctx context.Context) error {
	if c.stopped() {
		return errors.New("localpg: restart of a stopped cluster")
	}
	if c.persistent {
		if err := c.stopPersistent(ctx); err != nil {
			return err
		}
		return c.pgCtlStart(ctx)
	}
	if err := c.shutdownChild(ctx, syscall.SIGINT); err != nil {
		return err
	}
	return c.respawn(ctx)
}

// RestartImmediate stops the server with an immediate shutdown (no checkpoint: every backend
// quits at once and the next start recovers from the WAL) and starts it again on the same port.
// Throwaway clusters only.
func (c *Cluster) RestartImmediate(ctx context.Context) error {
	if c.persistent || c.cmd == nil {
		return errors.New("localpg: RestartImmediate needs a throwaway cluster")
	}
	if c.stopped() {
		return errors.New("localpg: restart of a stopped cluster")
	}
	if err := c.shutdownChild(ctx, syscall.SIGQUIT); err != nil {
		return err
	}
	return c.respawn(ctx)
}

// Crash kills the postmaster and every backend with SIGKILL, then starts the server again on
// the same port: it recovers from its WAL as after a machine crash. Throwaway clusters only.
func (c *Cluster) Crash(ctx context.Context) error {
	if c.persistent || c.cmd == nil {
		return errors.New("localpg: Crash needs a throwaway cluster")
	}
	if c.stopped() {
		return errors.New("localpg: crash of a stopped cluster")
	}
	c.killServer()
	return c.respawn(ctx)
}

// shutdownChild signals the postmaster and waits for it to exit.
func (c *Cluster) shutdownChild(ctx context.Context, sig syscall.Signal) error {
	_ = c.cmd.Process.Signal(sig)
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	select {
	case <-c.exited:
		return nil
	case <-wait.Done():
		c.killServer()
		return fmt.Errorf("localpg: shutdown did not finish, killed: %w", wait.Err())
	}
}

// respawn starts the postmaster again on the same port and re-arms the guard for its new
// process group.
func (c *Cluster) respawn(ctx context.Context) error {
	if err := c.spawn(ctx, c.port); err != nil {
		return err
	}
	guard, err := procguard.Start(c.cmd.Process.Pid, c.Dir, c.SocketDir)
	if err != nil {
		return err
	}
	old := c.guard
	c.guard = guard
	if old != nil {
		_ = old.Disarm()
	}
	return nil
}

func (c *Cluster) stopped() bool { return c.isStopped.Load() }
