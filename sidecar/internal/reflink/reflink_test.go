package reflink_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/reflink"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestCheckOnRealFileSystems: Btrfs and XFS made with reflink clone; XFS without it and ext4
// do not, and say so by name. Each is a real file system in an image on a loop device.
func TestCheckOnRealFileSystems(t *testing.T) {
	for fs, want := range map[string]string{"btrfs": "", "xfs": "", "xfs-noreflink": "without reflink", "ext4": "on ext4"} {
		t.Run(fs, func(t *testing.T) {
			l := testenv.StartLoopFS(t, fs, "", 512<<20)
			err := reflink.Check(l.Dir)
			switch {
			case want == "" && err != nil:
				t.Fatalf("%s: %v, want it to clone", fs, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("%s: %v, want an error saying %q", fs, err, want)
			}
		})
	}
}

func TestCheckOfAMissingPath(t *testing.T) {
	err := reflink.Check(filepath.Join(t.TempDir(), "nothing", "here"))
	if err == nil || !strings.Contains(err.Error(), "not visible on this machine") {
		t.Fatalf("%v", err)
	}
}
