// Package dev_test runs `dataenv dev` as a user would: from a directory postgres may not enter,
// with the default metrics port taken, twice on one directory, and with --reset.
package dev_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, nil) }

// devProc is a running `dataenv dev`.
type devProc struct {
	cmd   *exec.Cmd
	out   *testenv.LogBuffer
	dsn   string
	addr  string
	done  chan struct{}
	lines chan string
}

var (
	psqlRE    = regexp.MustCompile(`psql '([^']+)'`)
	metricsRE = regexp.MustCompile(`Metrics: http://([^/]+)/metrics`)
)

// startDev runs dataenv dev --dir dir args... and waits for its banner.
func startDev(t *testing.T, dir string, args ...string) *devProc {
	t.Helper()
	p := runDev(t, dir, args...)
	deadline := time.After(2 * time.Minute)
	for p.dsn == "" || p.addr == "" {
		select {
		case l := <-p.lines:
			if m := psqlRE.FindStringSubmatch(l); m != nil {
				p.dsn = m[1]
			}
			if m := metricsRE.FindStringSubmatch(l); m != nil {
				p.addr = m[1]
			}
		case <-p.done:
			t.Fatalf("dataenv dev exited: %v\n%s", p.cmd.ProcessState, p.out.String())
		case <-deadline:
			t.Fatalf("no banner from dataenv dev:\n%s", p.out.String())
		}
	}
	return p
}

// runDev starts dataenv dev and returns at once; it is stopped with SIGINT at cleanup.
func runDev(t *testing.T, dir string, args ...string) *devProc {
	t.Helper()
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"dev", "--dir", dir, "--log-level", "warn"}, args...)...)
	cmd.Env = withoutDataenvEnv()
	p := &devProc{cmd: cmd, out: &testenv.LogBuffer{}, done: make(chan struct{}), lines: make(chan string, 100)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, p.out))
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *devProc) stop(t *testing.T) {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("dataenv dev ignored SIGINT for 90 s:\n%s", p.out.String())
	}
}

// exitText waits for the process to exit by itself and returns what it printed.
func (p *devProc) exitText(t *testing.T) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("dataenv dev did not exit:\n%s", p.out.String())
	}
	return p.out.String()
}

func withoutDataenvEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATAENV_HTTP_ADDR=") && !strings.HasPrefix(kv, "DATAENV_DSN=") {
			env = append(env, kv)
		}
	}
	return env
}

func ping(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id string
	if err := conn.QueryRow(ctx, `SELECT dataenv.ping()::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM dataenv.wait($1::uuid, '60 s')`, id).Scan(&status); err != nil || status != "succeeded" {
		t.Fatalf("ping through dataenv dev: %s %v", status, err)
	}
}

// holdPort keeps addr busy for the test (if another process already has it, it is busy anyway).
func holdPort(t *testing.T, addr string) {
	if ln, err := net.Listen("tcp", addr); err == nil {
		t.Cleanup(func() { ln.Close() })
	}
}

// A clone under a directory postgres cannot enter (root's 0700 home on a fresh machine), with the
// default metrics port taken: dev still starts, says where the cluster went and which port it
// chose, and a second dev on the same directory says where the first runs and leaves it alone.
func TestDevFromUnreachableDirWithDefaultPortTaken(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "clone", ".dataenv")
	t.Cleanup(func() { removeRelocated(t, dir) }) // after the instances stop (cleanups run last first)
	holdPort(t, "127.0.0.1:9750")
	first := startDev(t, dir)
	if first.addr == "127.0.0.1:9750" {
		t.Fatalf("dev reports the taken port 9750:\n%s", first.out.String())
	}
	ping(t, first.dsn)
	if os.Geteuid() == 0 && !strings.Contains(first.out.String(), "The local cluster lives in") {
		t.Fatalf("as root under a 0700 parent, dev does not say where the cluster went:\n%s", first.out.String())
	}

	second := runDev(t, dir)
	text := second.exitText(t)
	if second.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(text, "already runs for") || !strings.Contains(text, first.dsn) {
		t.Fatalf("a second dev on the same directory: exit %v\n%s", second.cmd.ProcessState, text)
	}
	ping(t, first.dsn) // the first instance and its cluster are untouched
}

// An address the user chose that is taken is an error naming --http-addr, before dev says it
// runs; --reset starts from scratch.
func TestDevBusyExplicitPortAndReset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".dataenv")
	t.Cleanup(func() { removeRelocated(t, dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := runDev(t, dir, "--http-addr", ln.Addr().String())
	text := busy.exitText(t)
	if !strings.Contains(text, "--http-addr") || strings.Contains(text, "dataenv is running") {
		t.Fatalf("dev on a taken --http-addr:\n%s", text)
	}

	p := startDev(t, dir, "--http-addr", "127.0.0.1:0")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT dataenv.create_workspace('before_reset')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	p.stop(t)

	r := startDev(t, dir, "--reset", "--http-addr", "127.0.0.1:0")
	if conn, err = pgx.Connect(ctx, r.dsn); err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM dataenv.workspaces`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after --reset: %d workspaces (%v)", n, err)
	}
}

// removeRelocated deletes a cluster dev put outside the directory (root under a 0700 parent).
func removeRelocated(t *testing.T, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "pg-location"))
	if err != nil {
		return
	}
	pgDir := strings.TrimSpace(string(b))
	if strings.HasPrefix(pgDir, "/var/lib/dataenv/dev/") {
		_ = os.RemoveAll(filepath.Dir(pgDir))
	}
}
