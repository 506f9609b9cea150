package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cleanupTimeout bounds how long Main waits for components to stop.
const cleanupTimeout = 2 * time.Minute

type cleanupEntry struct {
	name string
	fn   func(ctx context.Context) error
}

var registry struct {
	mu      sync.Mutex
	entries []cleanupEntry
}

// RegisterCleanup registers fn to run when Main finishes (after m.Run, in reverse order of
// registration), or at once from StopAll. Use it for processes or state a test helper starts
// for the whole package.
func RegisterCleanup(name string, fn func(ctx context.Context) error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.entries = append(registry.entries, cleanupEntry{name: name, fn: fn})
}

// StopAll runs every registered cleanup (last registered first), each once, and returns their
// errors joined. Main calls it; tests rarely need to.
func StopAll(ctx context.Context) error {
	var errs []error
	for {
		registry.mu.Lock()
		n := len(registry.entries)
		if n == 0 {
			registry.mu.Unlock()
			return errors.Join(errs...)
		}
		e := registry.entries[n-1]
		registry.entries = registry.entries[:n-1]
		registry.mu.Unlock()
		if err := e.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", e.name, err))
		}
	}
}

// Main runs setup (when not nil), then the tests, then stops everything started through testenv,
// and exits with the tests' code. A setup error or panic, a failed cleanup, SIGINT and SIGTERM
// all end in a non-zero exit after the cleanup. Call it from TestMain.
func Main(m *testing.M, setup func(ctx context.Context) error) {
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup func(ctx context.Context) error) (code int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopSignals := exitOnSignal(cancel)
	defer stopSignals()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "testenv: panic: %v\n%s\n", r, debug.Stack())
			code = 2
		}
		if err := stopAllWithTimeout(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: cleanup: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	if setup != nil {
		if err := setup(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: setup: %v\n", err)
			return 1
		}
	}
	return m.Run()
}

func stopAllWithTimeout() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	return StopAll(ctx)
}

// exitOnSignal stops everything and exits on SIGINT, SIGTERM or SIGHUP. It returns a function
// that stops listening.
func exitOnSignal(cancel context.CancelFunc) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "testenv: %v: stopping test components\n", sig)
			cancel()
			if err := stopAllWithTimeout(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: cleanup: %v\n", err)
			}
			code := 1
			if s, ok := sig.(syscall.Signal); ok {
				code = 128 + int(s)
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}
