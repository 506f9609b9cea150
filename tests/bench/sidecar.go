package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

// The fork and lake suites drive the real dataenv sidecar (the shipped build, no test hooks)
// through SQL, as users do, and time each request's run on the sidecar (started_at to
// finished_at of its row), which leaves out the pipeline's millisecond or two.

var (
	dataenvOnce sync.Once
	dataenvBin  string
	dataenvErr  error
)

// dataenvBinary builds bin/dataenv of this module once per run, into a temporary directory.
func dataenvBinary(ctx context.Context) (string, error) {
	dataenvOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dataenv-bench-bin-")
		if err != nil {
			dataenvErr = err
			return
		}
		dataenvBin = filepath.Join(dir, "dataenv")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", dataenvBin, "./sidecar/cmd/dataenv")
		cmd.Dir = moduleRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			dataenvErr = fmt.Errorf("go build dataenv: %w\n%s", err, out)
		}
	})
	return dataenvBin, dataenvErr
}

// benchSidecar is a dataenv sidecar process on one bench control database.
type benchSidecar struct {
	pool *pgxpool.Pool
	cmd  *exec.Cmd
	done chan struct{}
}

// installedControl (re)creates database name in the bench cluster, installs dataenv there and
// starts a sidecar on it (extraEnv: DATAENV_* settings of the sidecar).
func installedControl(ctx context.Context, env *Env, name string, extraEnv ...string) (*benchSidecar, error) {
	dsn, err := env.CreateDatabase(ctx, name)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	_, err = install.Install(ctx, conn, install.Options{Logger: quietLogger("install")})
	conn.Close(ctx)
	if err != nil {
		return nil, fmt.Errorf("install dataenv in %s: %w", name, err)
	}
	return startSidecar(ctx, dsn, extraEnv...)
}

// startSidecar starts a sidecar on the installed control database at dsn.
func startSidecar(ctx context.Context, dsn string, extraEnv ...string) (*benchSidecar, error) {
	bin, err := dataenvBinary(ctx)
	if err != nil {
		return nil, err
	}
	s := &benchSidecar{done: make(chan struct{})}
	if s.pool, err = pgxpool.New(ctx, dsn); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "sidecar", "--dsn", dsn, "--http-addr", "-", "--log-level", "warn")
	s.cmd.Env = append(append(os.Environ(), sidecartest.ToolDirsEnv()), extraEnv...)
	s.cmd.Stderr = os.Stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("start the sidecar: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	return s, nil
}

// close stops the sidecar and closes the pool.
func (s *benchSidecar) close() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.pool.Close()
}

// handle makes a request of kind with args and waits for it; a request that did not succeed is
// an error.
func (s *benchSidecar) handle(ctx context.Context, kind string, args map[string]any) (json.RawMessage, error) {
	res, _, err := s.handleTimed(ctx, kind, args)
	return res, err
}

// handleTimed is handle, and also returns how long the request ran on the sidecar.
func (s *benchSidecar) handleTimed(ctx context.Context, kind string, args map[string]any) (json.RawMessage, time.Duration, error) {
	raw, _ := json.Marshal(args)
	var id string
	if err := s.pool.QueryRow(ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ($1, $2) RETURNING id::text`, kind, raw).Scan(&id); err != nil {
		return nil, 0, fmt.Errorf("request %s: %w", kind, err)
	}
	return s.waitFor(ctx, kind, id)
}

// handleID is handle, and also returns the request's id.
func (s *benchSidecar) handleID(ctx context.Context, kind string, args map[string]any) (json.RawMessage, string, error) {
	raw, _ := json.Marshal(args)
	var id string
	if err := s.pool.QueryRow(ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ($1, $2) RETURNING id::text`, kind, raw).Scan(&id); err != nil {
		return nil, "", fmt.Errorf("request %s: %w", kind, err)
	}
	res, _, err := s.waitFor(ctx, kind, id)
	return res, id, err
}

// waitFor waits for request id of kind; one that did not succeed is an error.
func (s *benchSidecar) waitFor(ctx context.Context, kind, id string) (json.RawMessage, time.Duration, error) {
	for {
		var status string
		var result []byte
		var errText *string
		var took time.Duration
		err := s.pool.QueryRow(ctx, `SELECT status, result, error, coalesce(finished_at - started_at, '0')
			FROM dataenv.wait($1::uuid, '60 s')`, id).Scan(&status, &result, &errText, &took)
		switch {
		case err != nil:
			return nil, 0, fmt.Errorf("wait for %s %s: %w", kind, id, err)
		case status == "succeeded":
			return result, took, nil
		case status == "failed" || status == "cancelled":
			msg := ""
			if errText != nil {
				msg = *errText
			}
			return nil, 0, fmt.Errorf("%s %s: %s", kind, status, msg)
		}
		select {
		case <-s.done:
			return nil, 0, errors.New("the sidecar exited")
		default:
		}
	}
}
