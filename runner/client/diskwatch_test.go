package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// What counts toward a job's disk cap in a watched directory is what it wrote: files that were
// there before the job do not count, files it writes or rewrites do.
func TestDiskWatchCountsWhatTheJobWrote(t *testing.T) {
	lake := t.TempDir()
	writeFile(t, filepath.Join(lake, "main", "t", "old.parquet"), 8<<20)
	writeFile(t, filepath.Join(lake, "main", "t", "rewritten.parquet"), 1<<20)
	time.Sleep(2 * mtimeSlack) // older than the job's start, give or take the clocks' lag
	w := newDiskWatch(t.TempDir(), []string{lake, filepath.Join(lake, "main")}, 1<<40, time.Millisecond)
	if got := w.written(); got != 0 {
		t.Fatalf("written before the job wrote anything: %d bytes", got)
	}
	writeFile(t, filepath.Join(lake, "main", "t", "new.parquet"), 2<<20)
	writeFile(t, filepath.Join(lake, "main", "t", "rewritten.parquet"), 1<<20)
	got := w.written()
	if got < 3<<20 || got >= 8<<20 {
		t.Fatalf("written = %d bytes, want the new and the rewritten file (3 MiB and a directory or two), not the old one", got)
	}
}

// The watched directories are walked only once the free space their file system lost could
// take the job past its cap: a job that writes nothing there never walks them, however many
// files they hold; one that writes past the cap is stopped while it writes, with what it wrote there.
func TestDiskWatchWalksTheLakeOnlyNearTheCap(t *testing.T) {
	lake := t.TempDir()
	for i := range 200 {
		writeFile(t, filepath.Join(lake, "main", "t", "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), 4096)
	}
	time.Sleep(2 * mtimeSlack)
	idle := newDiskWatch(t.TempDir(), []string{lake}, 1<<40, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	idle.run(ctx, nil, func(err error) { t.Errorf("an idle job was stopped: %v", err) })
	if idle.walks != 0 {
		t.Fatalf("the lake was walked %d times while nothing came near the cap", idle.walks)
	}

	busy := newDiskWatch(t.TempDir(), []string{lake}, 4<<20, time.Millisecond)
	exited := make(chan struct{})
	stopped := make(chan error, 1)
	go busy.run(context.Background(), exited, func(err error) { stopped <- err })
	defer close(exited)
	big := filepath.Join(lake, "main", "t", "big.csv")
	writeFile(t, big, 16<<20)
	select {
	case err := <-stopped:
		var se *SpillError
		if !errors.As(err, &se) || se.Watched <= 4<<20 || se.Cap != 4<<20 {
			t.Fatalf("stopped with %v; want a SpillError counting more than the cap written into the lake", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a job that wrote 16 MiB into its lake under a 4 MiB cap was not stopped")
	}
}

func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for size > 0 {
		n := min(size, len(buf))
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
		size -= n
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
