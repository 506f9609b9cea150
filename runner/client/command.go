package client

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// passEnv are the variables a runner keeps from the sidecar's environment: what DuckDB needs
// (PATH, HOME, TZ) and the proxy settings its HTTP client honours.
var passEnv = []string{
	"PATH", "HOME", "TZ",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy",
}

// childEnv is the runner's environment: passEnv from ours. home replaces HOME when not empty.
func childEnv(home string) []string {
	var env []string
	for _, k := range passEnv {
		v, ok := os.LookupEnv(k)
		if k == "HOME" && home != "" {
			v, ok = home, true
		}
		if ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// argv builds the command line of a runner in mode. runnerArgs are the runner's own flags.
// cgroup, when set, is a cgroup directory the runner joins before exec.
func (c *Client) argv(mode Isolation, w *workDir, mounts []Mount, runnerArgs []string, cgroup string) ([]string, []string, error) {
	var cmd []string
	env := childEnv("")
	// The runner sets its own score first thing, in every mode (choom cannot be the one in a PID
	// namespace of ours: it writes /proc/<its getpid()>, which there is 1 of our /proc).
	runnerArgs = append([]string{"--oom-score-adj", strconv.Itoa(c.cfg.OOMScoreAdj)}, runnerArgs...)
	switch mode {
	case IsolationJailed:
		name, path, err := jailTool(c.cfg.Jail)
		if err != nil {
			return nil, nil, err
		}
		if name == "nsjail" {
			cmd = nsjailArgs(path, c.cfg, w, mounts, runnerArgs)
		} else {
			cmd = bwrapArgs(path, c.cfg, w, mounts, runnerArgs)
		}
	default: // plain, and unshare: its namespaces come from sysProcAttr
		cmd = append([]string{c.cfg.RunnerPath}, runnerArgs...)
	}
	// A jail's wrappers are in the runner's process group too: choom gives them the score
	// before exec, so that the OOM killer never prefers the sidecar over them.
	if p, err := exec.LookPath("choom"); err == nil && mode == IsolationJailed {
		cmd = append([]string{p, "-n", strconv.Itoa(c.cfg.OOMScoreAdj), "--"}, cmd...)
	}
	if cgroup != "" {
		// The shell joins the cgroup, then execs the rest: nothing is forked outside it.
		cmd = append([]string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cgroup}, cmd...)
	}
	return cmd, env, nil
}

// bwrapArgs confines the runner with bubblewrap: new namespaces except the network (jobs reach
// catalogs and object stores), /usr read-only, a handful of /etc files, fresh /proc and a
// read-only /dev, the work directory at /.dataenv-jail/work (and /tmp inside it), the binary and the extension
// cache read-only, everything else read-only and empty. The sidecar's files and home are not
// there.
func bwrapArgs(bwrap string, cfg Config, w *workDir, mounts []Mount, runnerArgs []string) []string {
	a := []string{bwrap, "--die-with-parent", "--unshare-all", "--share-net",
		"--ro-bind", "/usr", "/usr"}
	a = append(a, systemDirs("--symlink", "--ro-bind-try")...)
	for _, f := range etcFiles {
		a = append(a, "--ro-bind-try", f, f)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--bind", w.host, jailWork,
		"--bind", w.host+"/tmp", "/tmp",
		"--ro-bind", cfg.RunnerPath, jailRunner,
		"--ro-bind", cfg.ExtensionDir, jailExtension)
	for _, m := range mounts {
		opt := "--ro-bind"
		if m.Writable {
			opt = "--bind"
		}
		a = append(a, opt, m.Path, m.Path)
	}
	a = append(a,
		// The jail's own root and /dev are tmpfs: read-only, so the work dir stays the only
		// writable place and the spill watchdog sees every byte a job writes.
		"--remount-ro", "/", "--remount-ro", "/dev",
		"--chdir", jailWork, "--clearenv")
	for _, kv := range childEnv(jailWork) {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return append(append(a, "--", jailRunner), runnerArgs...)
}

// nsjailArgs is the nsjail equivalent of bwrapArgs (network kept, no resource limits of
// nsjail's own: the memory limit is DuckDB's and the disk cap is the watchdog's).
func nsjailArgs(nsjail string, cfg Config, w *workDir, mounts []Mount, runnerArgs []string) []string {
	// --skip_setsid keeps the jail in the runner's process group, so killing the group kills
	// the jailed runner too. It is safe here: the group leads its own session, off any terminal.
	a := []string{nsjail, "--mode", "o", "--quiet", "--skip_setsid", "--disable_clone_newnet",
		// fsize in MB: nsjail's "inf" for it overflows into a limit that fails every write.
		"--time_limit", "0", "--rlimit_as", "inf", "--rlimit_fsize", "16777216",
		"--rlimit_nofile", "max", "--rlimit_nproc", "max",
		"--bindmount_ro", "/usr"}
	a = append(a, systemDirs("--symlink", "--bindmount_ro")...)
	for _, f := range etcFiles {
		if _, err := os.Stat(f); err == nil {
			a = append(a, "--bindmount_ro", f)
		}
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"} {
		a = append(a, "--bindmount", d)
	}
	for i, d := range []string{"/dev/stdin", "/dev/stdout", "/dev/stderr"} {
		a = append(a, "--symlink", "/proc/self/fd/"+strconv.Itoa(i)+":"+d)
	}
	a = append(a, "--symlink", "/proc/self/fd:/dev/fd",
		"--bindmount", w.host+":"+jailWork,
		"--bindmount", w.host+"/tmp:/tmp",
		"--bindmount_ro", cfg.RunnerPath+":"+jailRunner,
		"--bindmount_ro", cfg.ExtensionDir+":"+jailExtension)
	for _, m := range mounts {
		opt := "--bindmount_ro"
		if m.Writable {
			opt = "--bindmount"
		}
		a = append(a, opt, m.Path+":"+m.Path)
	}
	a = append(a, "--cwd", jailWork)
	for _, kv := range childEnv(jailWork) {
		a = append(a, "--env", kv)
	}
	if slices.Contains(runnerArgs, "--ready-fd") {
		a = append(a, "--pass_fd", "3") // nsjail closes other inherited descriptors
	}
	return append(append(a, "--", jailRunner), runnerArgs...)
}

// etcFiles are the only parts of /etc a jailed runner sees: name resolution, TLS roots, time.
var etcFiles = []string{
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/resolv.conf", "/etc/hosts",
	"/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf", "/etc/localtime",
	"/etc/passwd", "/etc/group",
}

// systemDirs mounts /bin, /lib, /lib64, /sbin: as symlinks into /usr where the host has merged
// /usr, read-only otherwise. nsjail has no symlink option: a merged /usr is bound as is.
func systemDirs(symlinkOpt, bindOpt string) []string {
	var a []string
	for _, d := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		target, err := os.Readlink(d)
		switch {
		case err == nil && bindOpt == "--ro-bind-try":
			a = append(a, symlinkOpt, target, d)
		case err == nil:
			a = append(a, bindOpt, d)
		default:
			if _, err := os.Stat(d); err == nil {
				if bindOpt == "--ro-bind-try" {
					a = append(a, bindOpt, d, d)
				} else {
					a = append(a, bindOpt, d)
				}
			}
		}
	}
	return a
}

// sysProcAttr makes the runner lead its own session and process group (pgid = pid, off our
// terminal), killed when we die. For IsolationUnshare it also gets its own PID namespace, as
// `unshare --pid --fork` would give it, from the clone flags themselves: the runner is PID 1
// there (everything it starts dies with it) and we see its exit status as is, with no wrapper
// in between that could misreport a signal (util-linux's unshare turns a child's SIGKILL into
// "exit 1").
func sysProcAttr(mode Isolation) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if mode == IsolationUnshare {
		a.Cloneflags = syscall.CLONE_NEWPID
		if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
			a.Cloneflags |= syscall.CLONE_NEWUSER
			a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
			a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		}
	}
	return a
}
