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

// runAs is how initdb, pg_ctl and postgres run: under which OS identity, and in which root.
//
//	no Root, not root: as the caller, nothing changes
//	no Root, root:     as the unprivileged user (setuid), initdb and postgres refuse root
//	Root, root:        chroot into Root, then setuid to the root's own postgres user
//	Root, not root:    a user namespace maps the caller to the root's postgres user, then chroot
//	                   (needs unprivileged user namespaces, which Debian allows by default)
type runAs struct {
	name     string
	uid, gid uint32 // the server's identity, as Root's /etc/passwd (or the host's) names it
	setuid   bool   // the caller is root: switch to uid/gid
	root     string // "" or an absolute, symlink-free directory to chroot into
	// selfLinked: the root holds a link at its own path to "/", so a path of this machine
	// under the root names the same file inside it (tests/setup/pgroots.sh makes one).
	selfLinked bool
}

// resolveRunAs picks the identity for cfg: $DATAENV_PG_USER or postgres, looked up in the
// root's /etc/passwd when cfg.Root is set.
func resolveRunAs(cfg Config) (*runAs, error) {
	name := os.Getenv("DATAENV_PG_USER")
	if name == "" {
		name = "postgres"
	}
	if cfg.Root == "" {
		return hostRunAs(name)
	}
	root, err := filepath.Abs(cfg.Root)
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		return nil, fmt.Errorf("localpg: root %s: %w", cfg.Root, err)
	}
	uid, gid, err := lookupPasswd(filepath.Join(root, "etc", "passwd"), name)
	if err != nil {
		return nil, fmt.Errorf("localpg: the root %s has no user %q to run postgres as (%v): "+
			"is a postgresql-N package installed in it? (tests/setup/deps.sh prepares such roots)",
			root, name, err)
	}
	r := &runAs{name: name, uid: uid, gid: gid, setuid: os.Geteuid() == 0, root: root}
	if target, err := os.Readlink(filepath.Join(root, root)); err == nil && target == "/" {
		r.selfLinked = true
	}
	if !r.setuid {
		if err := userNamespacesAllowed(); err != nil {
			return nil, fmt.Errorf("localpg: running PostgreSQL from the root %s needs root "+
				"(chroot) or unprivileged user namespaces: %w", root, err)
		}
	}
	return r, nil
}

// hostRunAs is the identity without a root: the caller, or name when the caller is root.
func hostRunAs(name string) (*runAs, error) {
	if os.Geteuid() != 0 {
		return &runAs{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("localpg: running as root, and initdb/postgres refuse root; the "+
			"system user %q to run them as is missing (%v): install the postgresql package "+
			"(tests/setup/deps.sh) or set DATAENV_PG_USER", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &runAs{name: name, uid: uint32(uid), gid: uint32(gid), setuid: true}, nil
}

// lookupPasswd finds name's uid and gid in a passwd file.
func lookupPasswd(path, name string) (uid, gid uint32, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || f[0] != name {
			continue
		}
		u, err1 := strconv.ParseUint(f[2], 10, 32)
		g, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, fmt.Errorf("bad entry %q", line)
		}
		return uint32(u), uint32(g), nil
	}
	return 0, 0, fmt.Errorf("no entry in %s", path)
}

// userNamespacesAllowed reports why an unprivileged user namespace cannot be created, if so.
func userNamespacesAllowed() error {
	for _, f := range []string{"/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces"} {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == "0" {
			return fmt.Errorf("%s is 0", f)
		}
	}
	return nil
}

// chown gives paths to the server's identity (a no-op unless the caller is root).
func (r *runAs) chown(paths ...string) error {
	if !r.setuid {
		return nil
	}
	for _, p := range paths {
		if err := os.Lchown(p, int(r.uid), int(r.gid)); err != nil {
			return fmt.Errorf("localpg: chown %s to %s: %w", p, r.name, err)
		}
	}
	return nil
}

// command builds a command that runs bin (a path as the server sees it) in dir (a path of this
// machine), as the server's identity and in its root, without the caller's PG* environment
// (PGDATA, PGPORT, ... would change what the tools do).
func (r *runAs) command(ctx context.Context, dir, bin string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = r.inner(dir)
	switched := r.setuid || r.root != ""
	cmd.Env = cleanEnv(switched)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if r.setuid {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.uid, Gid: r.gid}
	}
	if r.root != "" {
		cmd.SysProcAttr.Chroot = r.root
		if !r.setuid {
			// The child keeps every capability in its new user namespace until exec, so it may
			// chroot; inside, the caller's files look owned by the root's postgres user.
			cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(r.uid), HostID: os.Getuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(r.gid), HostID: os.Getgid(), Size: 1}}
		}
	}
	if switched {
		cmd.Env = append(cmd.Env, "HOME="+cmd.Dir, "USER="+r.name, "LOGNAME="+r.name)
	}
	return cmd
}

// inner is a path of this machine as the server sees it: the same path without a root or with a
// self-linked one, the path under the root otherwise. Paths outside the root are returned
// unchanged (the server cannot see them; prepareDir refuses such directories).
func (r *runAs) inner(p string) string {
	if r.root == "" || r.selfLinked {
		return p
	}
	rel, err := filepath.Rel(r.root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return filepath.Join("/", rel)
}

// outer is the inverse of inner: a path the server reports, as a path of this machine.
func (r *runAs) outer(p string) string {
	if r.root == "" || r.selfLinked || !filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.root, p)
}

// within reports whether dir is inside the root (always true without one).
func (r *runAs) within(dir string) bool {
	if r.root == "" {
		return true
	}
	rel, err := filepath.Rel(r.root, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// tempParent is where temporary cluster and socket directories go: the system's temporary
// directory, or the root's /tmp.
func (r *runAs) tempParent() string {
	if r.root == "" {
		return ""
	}
	return filepath.Join(r.root, "tmp")
}

// cleanEnv is the caller's environment without PG* (and without HOME, USER and LOGNAME when the
// tool runs as another identity).
func cleanEnv(switched bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || (switched && (k == "HOME" || k == "USER" || k == "LOGNAME")) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C.UTF-8")
}

// checkTraversable reports a clear error when the server's user cannot reach dir (a parent
// directory without the x bit for others, such as a 0700 home directory). Only the caller's own
// files are in question when it is not root.
func (r *runAs) checkTraversable(dir string) error {
	if !r.setuid {
		return nil
	}
	top := filepath.Dir(r.root)
	if r.root == "" {
		top = "/"
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if d == top || d == filepath.Dir(d) {
			return nil
		}
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
	}
}

// Reachable reports, as a clear error, when the user initdb and postgres run as (postgres, when
// this process is root) cannot reach dir: a parent directory such as a 0700 home directory.
func Reachable(dir string) error {
	ra, err := resolveRunAs(Config{})
	if err != nil {
		return err
	}
	return ra.checkTraversable(dir)
}
