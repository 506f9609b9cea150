package procguard

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func TestFireKillsGroupAndRemovesDirs(t *testing.T) {
	cmd := startGroup(t)
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	g, err := Start(cmd.Process.Pid, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Fire(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("process group not killed: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s not removed: %v", dir, err)
	}
}

func TestDisarmLeavesEverything(t *testing.T) {
	cmd := startGroup(t)
	dir := t.TempDir()
	g, err := Start(cmd.Process.Pid, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Disarm(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("process killed by a disarmed guard: %v", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("dir removed by a disarmed guard: %v", err)
	}
}

func TestFireKillsChildrenInOtherSessions(t *testing.T) {
	// The leader forks a child that moves to a session of its own, as PostgreSQL backends do.
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 300 & echo $! ; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var kid int
	if _, err := fmt.Fscan(out, &kid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(kid, syscall.SIGKILL) })
	g, err := Start(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Fire(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// SIGKILL is delivered at once, but the exit takes a moment: wait for the child to be gone
	// (or a zombie waiting for init).
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", kid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d in its own session survived: %s", kid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFireDetachesMounts: a file system mounted inside a guarded directory is detached before
// the directory is removed (as root: a real tmpfs; otherwise the mount list of a plain directory
// must not keep its removal from happening).
func TestFireDetachesMounts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	mnt := filepath.Join(dir, "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "procguard-test", mnt).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
		if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g, err := StartUnmounting(0, []string{mnt}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Fire(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(b), mnt) {
		t.Fatalf("%s still mounted", mnt)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s not removed (root=%v): %v", dir, root, err)
	}
}
