// Package sidecartest runs the real dataenv binary as a child process for end-to-end tests: a
// sidecar that can be stopped with SIGTERM or killed with SIGKILL at an armed crash point, and
// restarted against the same control database.
package sidecartest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"

	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds the cgo-free dataenv binary once per test process and returns its path.
func Binary() (string, error) {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dataenv-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "dataenv")
		cmd := exec.Command("go", "build", "-tags", "dataenv_testhooks", "-o", binPath, "./sidecar/cmd/dataenv")
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build dataenv: %w\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Install installs dataenv into the database at dsn.
func Install(t testing.TB, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to install: %v", err)
	}
	defer conn.Close(ctx)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := install.Install(ctx, conn, install.Options{Logger: quiet}); err != nil {
		t.Fatalf("install dataenv: %v", err)
	}
}

// ToolDirsEnv is DATAENV_PG_TOOLS_DIRS for a test sidecar: the directories already set, then
// the client tools of every prepared root (testenv.PGToolDirs), so that the sidecar copies
// databases of every PostgreSQL version the tests start.
func ToolDirsEnv() string {
	dirs := testenv.PGToolDirs()
	if own := os.Getenv("DATAENV_PG_TOOLS_DIRS"); own != "" {
		dirs = append([]string{own}, dirs...)
	}
	return "DATAENV_PG_TOOLS_DIRS=" + strings.Join(dirs, string(os.PathListSeparator))
}

// Options of a sidecar process.
type Options struct {
	DSN      string
	HTTPAddr string   // default "-" (no listener)
	Env      []string // extra KEY=VALUE, e.g. DATAENV_CRASH_AT=...
	Args     []string // extra flags
}

// Process is a running sidecar.
type Process struct {
	t    testing.TB
	cmd  *exec.Cmd
	logs *testenv.LogBuffer
	done chan struct{}
	err  error
}

// Start runs `dataenv sidecar` with test hooks enabled; it is killed at test cleanup.
func Start(t testing.TB, opts Options) *Process {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "-"
	}
	args := append([]string{"sidecar", "--dsn", opts.DSN, "--http-addr", opts.HTTPAddr, "--log-level", "debug"}, opts.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), ToolDirsEnv()), opts.Env...)
	p := &Process{t: t, cmd: cmd, logs: &testenv.LogBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sidecar: %v", err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			// A goroutine dump in the logs shows where a stuck sidecar waits.
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-p.done:
			case <-time.After(3 * time.Second):
			}
		}
		p.Kill()
		if t.Failed() {
			t.Logf("sidecar pid %d logs:\n%s", cmd.Process.Pid, p.Logs())
		}
	})
	return p
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to timeout for a clean exit.
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("sidecar did not stop within %s", timeout)
	}
}

// Exited returns a channel closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// WaitExit waits for the process to exit by itself (an armed crash point) within timeout.
func (p *Process) WaitExit(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("sidecar still running after %s", timeout)
	}
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Logs returns everything the process wrote so far.
func (p *Process) Logs() string { return p.logs.String() }

// Row is a request row as dataenv.wait returns it.
type Row struct {
	ID       uuid.UUID
	Kind     string
	Status   string
	Result   []byte
	Error    *string
	Attempts int
}

// Wait calls dataenv.wait(id, timeout) on conn and returns the row.
func Wait(t testing.TB, conn *pgx.Conn, id uuid.UUID, timeout time.Duration) Row {
	t.Helper()
	var r Row
	err := conn.QueryRow(context.Background(),
		`SELECT id, kind, status, result, error, attempts FROM dataenv.wait($1, $2)`, id, timeout).
		Scan(&r.ID, &r.Kind, &r.Status, &r.Result, &r.Error, &r.Attempts)
	if err != nil {
		t.Fatalf("dataenv.wait(%s): %v", id, err)
	}
	return r
}

// DropSlot ends the walsender of the installation's slot and drops the slot, so that the test
// database can be dropped; it retries while a killed sidecar's walsender is still going away.
func DropSlot(conn *pgx.Conn) {
	ctx := context.Background()
	for range 50 {
		_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = dataenv.slot_name() AND active_pid IS NOT NULL`)
		_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = dataenv.slot_name()`)
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Signal is the signal that ended the process (0 when it exited, or is still running).
func (p *Process) Signal() syscall.Signal {
	select {
	case <-p.done:
	default:
		return 0
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}
