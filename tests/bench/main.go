// Command bench runs dataenv's benchmark suites (`make bench`) and rewrites their sections of
// BENCHMARKS.md at the repository root, keeping every other section. Progress goes to stderr.
//
//	go run ./tests/bench                   # every suite
//	go run ./tests/bench -only pipeline    # some suites (comma-separated)
//	go run ./tests/bench -list             # the suites
//
// A suite is a Go type registered from an init function in this package (see suite.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		os.Exit(workerMain(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	only := flag.String("only", "", "comma-separated suites to run (default: all)")
	list := flag.Bool("list", false, "list the suites and exit")
	out := flag.String("out", "", "file to update (default: BENCHMARKS.md at the module root)")
	quick := flag.Bool("quick", false, "short phases: a smoke run, numbers not worth committing")
	profile := flag.String("profile", "", "directory for CPU profiles of the worker subprocesses")
	noFsync := flag.Bool("no-fsync", false, "run the cluster with fsync and synchronous_commit off")
	forkSizes := flag.String("fork-sizes", os.Getenv("DATAENV_BENCH_FORK_SIZES"), "forks suite: comma-separated parent sizes in tables (default 10,100,1000; env DATAENV_BENCH_FORK_SIZES); e.g. -only forks -fork-sizes 1000 -out /tmp/b.md measures one size while iterating (its section would replace the full one)")
	forkClone := flag.Bool("fork-clone", true, "forks suite: also measure the PostgreSQL 18 reflink clone rows (false: leave them out, while iterating)")
	pipelineOnly := flag.Bool("runner-pipeline-only", false, "runner suite: only the jobs through the request pipeline, not the overhead table (while iterating: its section would replace the full one; use -out)")
	forkSteps := flag.Bool("fork-steps", false, "forks suite: print the steps (with their times) of every timed create_fork to stderr")
	nice := flag.Int("nice", -10, "scheduling priority of this program, its workers and its Postgres (inherited); applied when permitted (root), so that other work on a shared machine disturbs the numbers less")
	flag.Parse()
	if *list {
		ss, _ := selectSuites(nil)
		for _, s := range ss {
			fmt.Println(s.Name())
		}
		return 0
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	ss, err := selectSuites(names)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *out == "" {
		*out = filepath.Join(moduleRoot(), "BENCHMARKS.md")
	}
	env, err := newEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.Quick, env.Profile, env.Fsync = *quick, *profile, !*noFsync
	env.ForkSizes, env.ForkSteps, env.ForkClone, env.RunnerPipelineOnly = *forkSizes, *forkSteps, *forkClone, *pipelineOnly
	if err := setNice(*nice); err == nil {
		env.Nice = *nice
	} else {
		env.Progress("cannot set nice %d (%v): running at the default priority", *nice, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer env.close()
	failed := 0
	for _, s := range ss {
		if err := runSuite(ctx, env, s, *out); err != nil {
			env.Progress("suite %s failed: %v (its section is left as it was)", s.Name(), err)
			failed++
		}
		if ctx.Err() != nil {
			break
		}
	}
	env.Progress("done: %d suite(s), %d failed; %s", len(ss), failed, *out)
	if failed > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

func runSuite(ctx context.Context, env *Env, s Suite, path string) error {
	env.Progress("suite %s", s.Name())
	begun := time.Now()
	body, err := s.Run(ctx, env)
	if err != nil {
		return err
	}
	if strings.TrimSpace(body) == "" {
		return errors.New("the suite returned an empty section")
	}
	doc, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	updated, err := replaceSection(string(doc), s.Name(), body)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
		return err
	}
	env.Progress("suite %s done in %s; section written to %s", s.Name(), time.Since(begun).Round(time.Second), path)
	return nil
}

// moduleRoot is the directory holding go.mod, from the working directory up; the working
// directory when there is none.
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

func ncpu() int { return runtime.NumCPU() }

// setNice sets the priority of every thread of this process (Linux nice values are per thread;
// new threads and child processes inherit the creating thread's).
func setNice(n int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil {
			return err
		}
	}
	return nil
}
