// Command chaos is dataenv's chaos harness (`make chaos`): it runs every claimed request kind
// concurrently against the real sidecar binary on a CPU-contended machine while it injects
// faults (SIGKILL of the leader, a hot standby taking over, walsender terminations, storms of
// pg_terminate_backend on the sidecar's sessions, PostgreSQL fast and immediate restarts, the
// replication slot dropped), then checks that every request finished, none failed because of a
// fault, every effect exists exactly once and matches the control records, and nothing is left
// behind. It writes RELIABILITY.md at the repository root.
//
//	go run ./tests/chaos                 # the full run: 1,000 leader kills and the other faults
//	go run ./tests/chaos -kills 100      # a short run (what `make test` runs, tests/chaos/chaos_test.go)
//
// Progress goes to stderr; the sidecars' logs stay in the run directory it prints.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

func main() {
	kills := flag.Int("kills", 1000, "leader SIGKILLs to inject (other fault classes are injected in proportion)")
	hogs := flag.Int("hogs", runtime.NumCPU(), "CPU hogs (busy threads at nice 5) competing with the system under test")
	out := flag.String("out", "", "report to write (default: RELIABILITY.md at the module root)")
	seed := flag.Int64("seed", 0, "random seed (default: from the clock); the report names it")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(moduleRoot(), "RELIABILITY.md")
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[chaos %7.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
	}
	rep, err := Run(ctx, Options{Kills: *kills, Hogs: *hogs, Seed: *seed, Logf: logf})
	if err != nil {
		logf("chaos run failed: %v", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(rep.Markdown()), 0o644); err != nil {
		logf("write %s: %v", *out, err)
		os.Exit(1)
	}
	logf("%s; report written to %s", rep.Summary(), *out)
	if !rep.Clean() {
		os.Exit(1)
	}
}

// moduleRoot is the directory holding go.mod, from the working directory up.
func moduleRoot() string {
	wd, _ := os.Getwd()
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}
