package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/procguard"
)

// LoopFS is a file system made in an image file and mounted through a loop device: how tests
// and benchmarks get a data directory on Btrfs or XFS (which can clone files) on a machine whose
// disks are ext4. It needs root, and the mkfs tools `make deps` installs (btrfs-progs,
// xfsprogs).
type LoopFS struct {
	Dir  string // the mount point: put cluster directories under it
	Type string

	top   string // holds the image and the mount point
	guard *procguard.Guard
}

// mkfsArgs per LoopFS type: the command and its arguments before the image path.
var mkfsArgs = map[string][]string{
	"btrfs":         {"mkfs.btrfs", "-q", "-f"},
	"xfs":           {"mkfs.xfs", "-q", "-f", "-m", "reflink=1"},
	"xfs-noreflink": {"mkfs.xfs", "-q", "-f", "-m", "reflink=0"},
	"ext4":          {"mkfs.ext4", "-q", "-F"},
}

// MountLoopFS makes a file system of fsType (btrfs, xfs, xfs-noreflink or ext4) of size bytes
// (a sparse image) in a new directory under parent ("": the temporary directory) and mounts it.
// A guard unmounts and removes it if this process dies before Unmount. The error says what the
// machine refused (not root, no loop device, a kernel without the file system).
func MountLoopFS(fsType, parent string, size int64) (*LoopFS, error) {
	mkfs, ok := mkfsArgs[fsType]
	if !ok {
		return nil, fmt.Errorf("testenv: no LoopFS of type %q", fsType)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("testenv: mounting a file system image needs root")
	}
	top, err := os.MkdirTemp(parent, "dataenv-loopfs-"+fsType+"-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	l := &LoopFS{Dir: filepath.Join(top, "mnt"), Type: fsType, top: top}
	if l.guard, err = procguard.StartUnmounting(0, []string{l.Dir}, top); err != nil {
		_ = os.RemoveAll(top)
		return nil, err
	}
	if err := l.mount(mkfs, size); err != nil {
		_ = l.guard.Fire()
		return nil, err
	}
	return l, nil
}

func (l *LoopFS) mount(mkfs []string, size int64) error {
	img := filepath.Join(l.top, "image")
	if err := os.Chmod(l.top, 0o755); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if err := os.Mkdir(l.Dir, 0o755); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(size), f.Close())
	}
	if err != nil {
		return fmt.Errorf("testenv: image %s: %w", img, err)
	}
	if err := runCommand(append(mkfs, img)...); err != nil {
		return err
	}
	if err := runCommand("mount", "-o", "loop", img, l.Dir); err != nil {
		return err
	}
	return os.Chmod(l.Dir, 0o755)
}

func runCommand(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testenv: %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Unmount unmounts the file system and removes its image. Stop what uses it first.
func (l *LoopFS) Unmount() error {
	if err := runCommand("umount", l.Dir); err != nil {
		return errors.Join(err, l.guard.Fire()) // the guard detaches it lazily
	}
	return errors.Join(os.RemoveAll(l.top), l.guard.Disarm())
}

// StartLoopFS is MountLoopFS for a test: unmounted at the test's cleanup (register what uses it
// after this call, so that it is stopped first); a machine that refuses fails the test.
func StartLoopFS(t testing.TB, fsType, parent string, size int64) *LoopFS {
	t.Helper()
	l, err := MountLoopFS(fsType, parent, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Unmount(); err != nil {
			t.Errorf("testenv: unmount %s: %v", l.Dir, err)
		}
	})
	return l
}
