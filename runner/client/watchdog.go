package client

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// diskWatch is what the disk watchdog measures: the work directory (whole) and the growth of
// watched directories (a job's local lake paths) since the job started.
type diskWatch struct {
	work    string
	watched []string
	base    int64
	limit   int64
	poll    time.Duration
}

// newDiskWatch records the watched directories' usage now, the baseline of their growth.
// Nested directories are measured once.
func newDiskWatch(work string, watched []string, limit int64, poll time.Duration) *diskWatch {
	w := &diskWatch{work: work, watched: outermost(watched), limit: limit, poll: poll}
	w.base = w.watchedUsage()
	return w
}

func (w *diskWatch) watchedUsage() int64 {
	var total int64
	for _, d := range w.watched {
		total += diskUsage(d)
	}
	return total
}

// run measures every poll and calls stop once usage passes the limit; it returns when ctx ends
// or the runner has exited.
func (w *diskWatch) run(ctx context.Context, exited <-chan struct{}, stop func(error)) {
	if w.limit < 0 {
		return
	}
	t := time.NewTicker(w.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-exited:
			return
		case <-t.C:
		}
		grown := max(w.watchedUsage()-w.base, 0)
		if used := diskUsage(w.work) + grown; used > w.limit {
			stop(&SpillError{Used: used, Cap: w.limit, Watched: grown})
			return
		}
	}
}

// outermost drops the directories that lie inside another one of dirs.
func outermost(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		d = filepath.Clean(d)
		inside := false
		for _, o := range dirs {
			o = filepath.Clean(o)
			if o != d && strings.HasPrefix(d, o+"/") {
				inside = true
			}
		}
		if !inside && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
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
