//go:build dataenv_testhooks

package crashpoint

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

var armed = load()

func load() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Split(os.Getenv("DATAENV_CRASH_AT"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			m[p] = true
		}
	}
	return m
}

// Hit kills the process at once if point is armed. Nothing is flushed, nothing deferred runs:
// exactly what a kill -9 does.
func Hit(point string) {
	if armed[point] {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // never return while the signal is delivered
	}
}

// Armed reports whether point is armed (for handlers that want to crash only once: tests arm a
// point together with a marker file, see HitOnce).
func Armed(point string) bool { return armed[point] }

// HitOnce kills the process at point the first time only: it creates marker (a path the test
// chooses via DATAENV_CRASH_MARKER_DIR) before dying, and does nothing when marker exists.
func HitOnce(point string) {
	if !armed[point] {
		return
	}
	dir := os.Getenv("DATAENV_CRASH_MARKER_DIR")
	if dir == "" {
		Hit(point)
		return
	}
	f, err := os.OpenFile(dir+"/"+point, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return // already crashed here once
	}
	_ = f.Close()
	Hit(point)
}

// FailOnce returns an error at point the first time only, instead of killing the process: a
// step that fails with a final error where a real one is hard to provoke (marker as in HitOnce;
// without DATAENV_CRASH_MARKER_DIR it fails every time).
func FailOnce(point string) error {
	if !armed[point] {
		return nil
	}
	if dir := os.Getenv("DATAENV_CRASH_MARKER_DIR"); dir != "" {
		f, err := os.OpenFile(dir+"/"+point, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil // already failed here once
		}
		_ = f.Close()
	}
	return errors.New("injected failure at " + point)
}
