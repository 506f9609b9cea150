package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/daemon"
	"github.com/dataenv/dataenv/sidecar/install"
)

func init() { RegisterWorker("dataenv", runDataenvWorker) }

// runDataenvWorker is the sidecar itself, in-process in the worker subprocess, with its default
// settings (8 handlers, batched outcomes).
func runDataenvWorker(ctx context.Context, dsn string, _ io.Writer) error {
	return daemon.Run(ctx, daemon.Config{DSN: dsn, HTTPAddr: "-", Logger: quietLogger("sidecar")})
}

// dataenvTarget: SELECT dataenv.ping() in autocommit; completion = NOTIFY on
// dataenv_request_finished from the outcome trigger, received on a LISTEN connection.
type dataenvTarget struct {
	dsn    string
	worker *Worker
	conns  []*pgx.Conn
}

func (t *dataenvTarget) Name() string { return "dataenv" }
func (t *dataenvTarget) DB() string   { return "bench_dataenv" }
func (t *dataenvTarget) WorkerPid() int {
	return t.worker.Pid()
}

func (t *dataenvTarget) Prepare(ctx context.Context, env *Env) error {
	dsn, err := env.CreateDatabase(ctx, t.DB())
	if err != nil {
		return err
	}
	t.dsn = dsn
	conn, err := connect(ctx, dsn, appMonitor)
	if err != nil {
		return err
	}
	_, err = install.Install(ctx, conn, install.Options{Logger: quietLogger("install")})
	conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("install dataenv: %w", err)
	}
	return nil
}

func (t *dataenvTarget) Start(ctx context.Context, env *Env, done func(string, time.Time)) error {
	if err := listen(ctx, t.dsn, "dataenv_request_finished", done); err != nil {
		return err
	}
	var err error
	t.worker, err = env.StartWorker(ctx, "dataenv", withApp(t.dsn, appWorker), nil)
	return err
}

func (t *dataenvTarget) Submitters(ctx context.Context, n int) ([]submitFunc, error) {
	subs, conns, err := connSubmitters(ctx, t.dsn, `SELECT dataenv.ping()::text`, n)
	t.conns = append(t.conns, conns...)
	return subs, err
}

func (t *dataenvTarget) FinishedAt(ctx context.Context, keys []string) (map[string]time.Time, error) {
	return finishedAt(ctx, t.dsn, "dataenv.requests", keys)
}

func (t *dataenvTarget) Stop() {
	closeAll(t.conns)
	t.conns = nil
	if t.worker != nil {
		if err := t.worker.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop dataenv worker: %v\n", err)
		}
		t.worker = nil
	}
}
