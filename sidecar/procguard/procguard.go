// Package procguard makes sure a process group and some directories disappear when the current
// process ends, however it ends: a clean return, os.Exit, a panic in a test goroutine, a test
// timeout, SIGKILL.
//
// A guard is a tiny /bin/sh process in a session of its own that blocks reading a pipe whose only
// writer is this process. When this process dies the kernel closes the pipe, the read returns, and
// the guard kills the process group (and the direct children of its leader, found with pgrep)
// and removes the directories. A clean shutdown disarms the
// guard first (Disarm), so a process group id reused later by an unrelated process is never hit.
package procguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// script: the first line read decides. "disarm" exits quietly; EOF (the owner died) or anything
// else kills process group $1 (when > 0) with the direct children of its leader (PostgreSQL
// backends run in sessions of their own), detaches the mounts listed before "--", and removes the
// arguments after it (never crossing into a file system still mounted inside). The leader is
// stopped first so it forks nothing new meanwhile.
const script = `read -r cmd
[ "$cmd" = disarm ] && exit 0
if [ "$1" -gt 0 ]; then
  kill -s STOP "$1" 2>/dev/null
  for kid in $(pgrep -P "$1" 2>/dev/null); do kill -s KILL "$kid" 2>/dev/null; done
  kill -s KILL -- "-$1" 2>/dev/null
fi
shift
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do umount -l -- "$1" 2>/dev/null; shift; done
[ "$#" -gt 0 ] && shift
[ "$#" -gt 0 ] && rm -rf --one-file-system -- "$@"
exit 0
`

// Guard is an armed guard. Its zero value is not usable; create one with Start.
type Guard struct {
	mu   sync.Mutex
	w    *os.File
	cmd  *exec.Cmd
	done bool
}

// Start arms a guard for process group pgid (0: none) and the given directories.
func Start(pgid int, dirs ...string) (*Guard, error) { return StartUnmounting(pgid, nil, dirs...) }

// StartUnmounting is Start that also detaches mounts (umount -l, which needs the privilege to
// unmount them) before removing the directories: a file system a test mounted in a directory it
// removes.
func StartUnmounting(pgid int, mounts []string, dirs ...string) (*Guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("procguard: pipe: %w", err)
	}
	args := append([]string{"-c", script, "procguard", strconv.Itoa(pgid)}, mounts...)
	args = append(append(args, "--"), dirs...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Stdin = r
	// A session of its own: a Ctrl-C sent to the terminal's process group does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("procguard: start guard: %w", err)
	}
	r.Close() // the guard holds the read end; this process keeps only the write end
	return &Guard{w: w, cmd: cmd}, nil
}

// Disarm tells the guard its job is done (the caller cleaned up itself) and waits for it to exit.
func (g *Guard) Disarm() error { return g.finish("disarm\n") }

// Fire makes the guard kill and remove now, and waits for it to finish.
func (g *Guard) Fire() error { return g.finish("") }

func (g *Guard) finish(line string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return nil
	}
	g.done = true
	var werr error
	if line != "" {
		_, werr = g.w.WriteString(line)
	}
	cerr := g.w.Close()
	return errors.Join(werr, cerr, g.cmd.Wait())
}
