package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"
)

// Workers are the consumers under test, run as subprocesses of this same binary
// (`bench -bench-worker NAME DSN`) so that their CPU time is measured apart from the load
// generator's, as they would be deployed. A worker runs until SIGTERM and may write lines to out
// (for instance completion events that only it can see).
type workerFunc func(ctx context.Context, dsn string, out io.Writer) error

const workerArg = "-bench-worker"

var workers = map[string]workerFunc{}

// RegisterWorker makes fn runnable as a worker subprocess (Env.StartWorker).
func RegisterWorker(name string, fn workerFunc) {
	if _, dup := workers[name]; dup {
		panic("bench: worker " + name + " registered twice")
	}
	workers[name] = fn
}

// workerMain is the subprocess side: bench -bench-worker NAME DSN.
func workerMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bench -bench-worker NAME DSN")
		return 2
	}
	fn, ok := workers[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench: no worker %q\n", args[0])
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
		}
	}
	if err := fn(ctx, args[1], os.Stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "bench worker %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// Worker is a running worker subprocess.
type Worker struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartWorker starts worker name against dsn; onLine (may be nil) gets each line it writes to
// stdout, on one goroutine. Stop it with Stop.
func (e *Env) StartWorker(ctx context.Context, name, dsn string, onLine func(string)) (*Worker, error) {
	if _, ok := workers[name]; !ok {
		return nil, fmt.Errorf("no worker %q", name)
	}
	cmd := exec.CommandContext(ctx, e.exe, workerArg, name, dsn)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if e.Profile != "" {
		cmd.Env = append(os.Environ(), "BENCH_CPUPROFILE="+filepath.Join(e.Profile, name+".cpu.pprof"))
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	w := &Worker{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if onLine != nil {
				onLine(sc.Text())
			}
		}
		w.err = cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// Pid is the worker's process id.
func (w *Worker) Pid() int { return w.cmd.Process.Pid }

// Exited is closed when the worker has exited.
func (w *Worker) Exited() <-chan struct{} { return w.done }

// Stop sends SIGTERM and waits for the worker to exit (SIGKILL after 20 s).
func (w *Worker) Stop() error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
		return errors.New("worker " + w.name + " ignored SIGTERM for 20 s; killed")
	}
	var ee *exec.ExitError
	if errors.As(w.err, &ee) && ee.ExitCode() == -1 {
		return nil // ended by our signal
	}
	return w.err
}
