package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyTarget is a system whose requests are a row inserted by one SQL statement in autocommit
// and whose completions are a NOTIFY with the request id from an outcome trigger, received on a
// LISTEN connection: dataenv, and the SKIP LOCKED baseline built the same way.
type notifyTarget struct {
	name      string
	db        string
	worker    string // RegisterWorker name
	channel   string // NOTIFY channel of completions
	submitSQL string // one row, one text column: the request id
	table     string // the requests table, for finished_at
	// setup creates the schema in the fresh database.
	setup func(ctx context.Context, conn *pgx.Conn) error

	dsn   string
	proc  *Worker
	conns []*pgx.Conn
}

func (t *notifyTarget) Name() string   { return t.name }
func (t *notifyTarget) DB() string     { return t.db }
func (t *notifyTarget) WorkerPid() int { return t.proc.Pid() }

func (t *notifyTarget) Prepare(ctx context.Context, env *Env) error {
	dsn, err := env.CreateDatabase(ctx, t.db)
	if err != nil {
		return err
	}
	t.dsn = dsn
	conn, err := connect(ctx, dsn, appMonitor)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return t.setup(ctx, conn)
}

func (t *notifyTarget) Start(ctx context.Context, env *Env, done func(string, time.Time)) error {
	if err := listen(ctx, t.dsn, t.channel, done); err != nil {
		return err
	}
	var err error
	t.proc, err = env.StartWorker(ctx, t.worker, withApp(t.dsn, appWorker), nil)
	return err
}

func (t *notifyTarget) Submitters(ctx context.Context, n int) ([]submitFunc, error) {
	subs, conns, err := connSubmitters(ctx, t.dsn, t.submitSQL, n)
	t.conns = append(t.conns, conns...)
	return subs, err
}

func (t *notifyTarget) FinishedAt(ctx context.Context, keys []string) (map[string]time.Time, error) {
	return finishedAt(ctx, t.dsn, t.table, keys)
}

func (t *notifyTarget) Stop() {
	closeAll(t.conns)
	t.conns = nil
	if t.proc != nil {
		if err := t.proc.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s worker: %v\n", t.worker, err)
		}
		t.proc = nil
	}
}
