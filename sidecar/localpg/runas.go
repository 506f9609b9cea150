package localpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// runAs is the OS identity initdb and postgres run under: nil when the process is not root.
type runAs struct {
	name     string
	uid, gid uint32
}

// resolveRunAs picks the unprivileged user when running as root: $DATAENV_PG_USER or postgres.
func resolveRunAs() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("DATAENV_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("localpg: running as root, and initdb/postgres refuse root; the "+
			"system user %q to run them as is missing (%v): install the postgresql package "+
			"(tests/setup/deps.sh) or set DATAENV_PG_USER", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// chown gives paths to the run-as user (a no-op when not root).
func (r *runAs) chown(paths ...string) error {
	if r == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Lchown(p, int(r.uid), int(r.gid)); err != nil {
			return fmt.Errorf("localpg: chown %s to %s: %w", p, r.name, err)
		}
	}
	return nil
}

// command builds a command that runs as the run-as user, in dir, without the caller's PG*
// environment (PGDATA, PGPORT, ... would change what the tools do).
func (r *runAs) command(ctx context.Context, dir, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if r != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid}
		cmd.Env = append(cmd.Env, "HOME="+dir, "USER="+r.name, "LOGNAME="+r.name)
	}
	return cmd
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || (os.Geteuid() == 0 && (k == "HOME" || k == "USER" || k == "LOGNAME")) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C.UTF-8")
}

// checkTraversable reports a clear error when the run-as user cannot reach dir (a parent
// directory without the x bit for others, such as a 0700 home directory).
func (r *runAs) checkTraversable(dir string) error {
	if r == nil {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if errors.Is(err, fs.ErrNotExist) && d != filepath.Dir(d) {
			continue // created enterable (0755) when the cluster is made
		}
		if err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		mode := st.Mode().Perm()
		if ok && !(mode&0o001 != 0 || (sys.Uid == r.uid && mode&0o100 != 0) ||
			(sys.Gid == r.gid && mode&0o010 != 0)) {
			return fmt.Errorf("localpg: user %s cannot enter %s (mode %v), so postgres cannot "+
				"use %s: choose a directory elsewhere (for example under /tmp or /var/lib)",
				r.name, d, mode, dir)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// Reachable reports, as a clear error, when the user initdb and postgres run as (postgres, when
// this process is root) cannot reach dir: a parent directory such as a 0700 home directory.
func Reachable(dir string) error {
	ra, err := resolveRunAs()
	if err != nil {
		return err
	}
	return ra.checkTraversable(dir)
}
