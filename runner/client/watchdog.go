package client

import (
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
)

// watchSpill measures dir every poll and calls stop once it uses more than limit bytes.
// It returns when ctx ends.
func watchSpill(ctx context.Context, dir string, limit int64, poll time.Duration, stop func(error)) {
	if limit < 0 {
		return
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if used := diskUsage(dir); used > limit {
			stop(&SpillError{Used: used, Cap: limit})
			return
		}
	}
}

// diskUsage is the disk dir's tree occupies (allocated blocks, so sparse files count for what
// they hold), without following symlinks: the job controls what is in there.
func diskUsage(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}
