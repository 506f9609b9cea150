package localpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// state is what a persistent cluster remembers between runs, in Dir/cluster.json (0600).
type state struct {
	Port          int    `json:"port"`
	SuperUser     string `json:"super_user"`
	SuperPassword string `json:"super_password"`
}

func (c *Cluster) statePath() string { return filepath.Join(c.Dir, "cluster.json") }

// startPersistent reuses Dir when it holds a cluster (attaching to a running server or starting a
// stopped one) and creates it otherwise. The server is started with pg_ctl, so it keeps running
// after this process ends until Stop (or pg_ctl stop).
func (c *Cluster) startPersistent(ctx context.Context, cfg Config) error {
	if cfg.Dir == "" {
		return errors.New("localpg: a persistent cluster needs Config.Dir")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if err := c.prepareDir(dir); err != nil {
		return err
	}
	var st state
	if isFile(filepath.Join(c.DataDir, "PG_VERSION")) {
		if st, err = c.loadState(); err != nil {
			return err
		}
		c.SuperUser, c.SuperPassword = st.SuperUser, st.SuperPassword
	} else {
		if err := c.initdb(ctx, cfg); err != nil {
			return err
		}
		if err := c.saveState(); err != nil {
			return err
		}
	}
	if pm, err := readPostmasterPID(c.DataDir); err == nil && syscall.Kill(pm.pid, 0) == nil {
		c.port = pm.port
		if err := c.ping(ctx); err == nil {
			c.attached = true
			c.logger.Info("postgres already running", "port", pm.port, "dir", dir)
			if sock := c.runAs.outer(pm.socketDir); pm.socketDir != "" && sock != c.SocketDir {
				c.removeOwnSocketDir()
				c.SocketDir = sock
			}
			return nil
		}
	}
	c.port = cfg.Port
	if c.port == 0 && st.Port != 0 && portFree(st.Port) {
		c.port = st.Port
	}
	if c.port == 0 {
		if c.port, err = FreePort(); err != nil {
			return err
		}
	}
	if err := c.pgCtlStart(ctx); err != nil {
		return err
	}
	c.logger.Info("postgres started", "port", c.port, "dir", dir, "major", c.Major)
	return c.saveState()
}

func (c *Cluster) pgCtlStart(ctx context.Context) error {
	if f, err := os.OpenFile(c.LogFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	}
	if err := c.runAs.chown(c.LogFile); err != nil {
		return err
	}
	offset := logSize(c.LogFile)
	opts := fmt.Sprintf("-p %d -k %s", c.port, c.inner(c.SocketDir))
	out, err := c.run(ctx, "pg_ctl", "start", "-D", c.inner(c.DataDir), "-w", "-t", "60",
		"-l", c.inner(c.LogFile), "-o", opts)
	if err != nil {
		return fmt.Errorf("localpg: pg_ctl start (port %d): %w\n%s\n%s", c.port, err, out,
			c.logTail(offset))
	}
	return c.waitReady(ctx, nil)
}

// stopPersistent stops the server with pg_ctl stop -m fast (then -m immediate) and keeps Dir.
func (c *Cluster) stopPersistent(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.inner(c.DataDir), "-m", "fast", "-w", "-t", "60")
	if err == nil {
		c.logger.Info("postgres stopped", "port", c.port)
		c.removeOwnSocketDir()
		return nil
	}
	out2, err2 := c.run(ctx, "pg_ctl", "stop", "-D", c.inner(c.DataDir), "-m", "immediate", "-w")
	if err2 != nil {
		return fmt.Errorf("localpg: pg_ctl stop: %w\n%s\n%s", err, out, out2)
	}
	return nil
}

func (c *Cluster) loadState() (state, error) {
	var st state
	b, err := os.ReadFile(c.statePath())
	if err != nil {
		return st, fmt.Errorf("localpg: %s holds a cluster but its credentials are unreadable "+
			"(remove the directory to start afresh): %w", c.Dir, err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.SuperUser == "" {
		return st, fmt.Errorf("localpg: %s is not a valid cluster state file (remove the "+
			"directory to start afresh): %v", c.statePath(), err)
	}
	return st, nil
}

func (c *Cluster) saveState() error {
	b, _ := json.MarshalIndent(state{Port: c.port, SuperUser: c.SuperUser,
		SuperPassword: c.SuperPassword}, "", "  ")
	if err := os.WriteFile(c.statePath(), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	return nil
}

// removeOwnSocketDir removes a socket directory created under the temporary directory (a Dir
// too long for a socket path); one inside Dir stays with the cluster.
func (c *Cluster) removeOwnSocketDir() {
	if c.SocketDir != filepath.Join(c.Dir, "sock") {
		_ = os.RemoveAll(c.SocketDir)
	}
}

// postmasterPID is what dataDir/postmaster.pid records.
type postmasterPID struct {
	pid, port int
	socketDir string
}

// readPostmasterPID reads dataDir/postmaster.pid: pid, data dir, start time, port, socket dir...
func readPostmasterPID(dataDir string) (postmasterPID, error) {
	var pm postmasterPID
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return pm, err
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 {
		return pm, fmt.Errorf("localpg: short postmaster.pid")
	}
	if pm.pid, err = strconv.Atoi(strings.TrimSpace(lines[0])); err != nil {
		return pm, err
	}
	pm.socketDir = strings.TrimSpace(lines[4])
	pm.port, err = strconv.Atoi(strings.TrimSpace(lines[3]))
	return pm, err
}
