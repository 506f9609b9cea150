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

// diskWatch is what the disk watchdog measures: the work directory (whole) and what the job
// wrote into the watched directories (a job's local lake paths) since it started.
//
// A lake's data path can hold tens of thousands of files, and walking it costs a lstat per file
// (about 165 ms for 50,000 files on a 2-CPU machine): the watchdog must not walk it before every
// job, nor at every poll. It reads instead, at every poll, how much free space the watched
// directories' file systems lost since the job started (one statfs each): the job's writes there
// cannot exceed that loss by more than what was freed meanwhile. Only once the work directory and
// that loss could pass the limit does it walk the watched directories, counting the files
// modified since the job started; and again once the loss has grown by the headroom that walk
// left, or every watchedWalkEvery in any case (what another process freed, or a file rewritten in
// place, does not show in the loss).
type diskWatch struct {
	work    string
	watched []string
	since   time.Time         // files modified at or after this are the job's writes
	free    map[uint64]uint64 // free bytes of each watched file system (by device) at the start
	limit   int64
	poll    time.Duration
	walks   int // walks of the watched directories so far (tests)
}

// watchedWalkEvery bounds how long a write the free-space loss does not show goes uncounted.
const watchedWalkEvery = 10 * time.Second

// mtimeSlack: file times come from the kernel's coarse clock, which lags the one time.Now reads
// by up to a tick; a file the job writes just after the start must not look older than it.
const mtimeSlack = 50 * time.Millisecond

// newDiskWatch records when the job starts and how much space the watched directories' file
// systems have free. Nested directories are walked once.
func newDiskWatch(work string, watched []string, limit int64, poll time.Duration) *diskWatch {
	w := &diskWatch{work: work, watched: outermost(watched), since: time.Now().Add(-mtimeSlack), limit: limit,
		poll: poll}
	w.free = freeSpace(w.watched)
	return w
}

// freeSpace is the free bytes of each file system holding one of dirs, by device.
func freeSpace(dirs []string) map[uint64]uint64 {
	free := map[uint64]uint64{}
	for _, d := range dirs {
		var st syscall.Stat_t
		var fs syscall.Statfs_t
		if syscall.Stat(d, &st) != nil || syscall.Statfs(d, &fs) != nil {
			continue
		}
		free[uint64(st.Dev)] = fs.Bfree * uint64(fs.Bsize)
	}
	return free
}

// lost is how much free space the watched file systems lost since the start (gains count 0).
func (w *diskWatch) lost() int64 {
	var total int64
	for dev, now := range freeSpace(w.watched) {
		if before, ok := w.free[dev]; ok && before > now {
			total += int64(before - now)
		}
	}
	return total
}

// written is the disk the files modified in the watched directories since the start occupy.
func (w *diskWatch) written() int64 {
	w.walks++
	var total int64
	for _, d := range w.watched {
		total += usageSince(d, w.since)
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
	var written, lostAtWalk int64
	lastWalk := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-exited:
			return
		case <-t.C:
		}
		work := diskUsage(w.work)
		if len(w.watched) > 0 {
			lost := w.lost()
			if work+written+(lost-lostAtWalk) > w.limit || time.Since(lastWalk) >= watchedWalkEvery {
				written, lostAtWalk, lastWalk = w.written(), lost, time.Now()
			}
		}
		if used := work + written; used > w.limit {
			stop(&SpillError{Used: used, Cap: w.limit, Watched: written})
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
	return usageSince(dir, time.Time{})
}

// usageSince is the disk taken by the entries of dir's tree modified at or after since (the
// whole tree for the zero time), dir itself left out.
func usageSince(dir string, since time.Time) int64 {
	var total int64
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && !info.ModTime().Before(since) {
			total += st.Blocks * 512
		}
		return nil
	})
	return total
}
