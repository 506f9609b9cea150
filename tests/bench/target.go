package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// target is one system under test in the pipeline suite: a database of its own in the shared
// cluster, a worker subprocess, a way to submit requests and a stream of completions.
type target interface {
	Name() string
	DB() string
	// Prepare creates the database and schema (once per run).
	Prepare(ctx context.Context, env *Env) error
	// Start starts the worker and the completion listener, which reports to done until ctx
	// ends (once per round).
	Start(ctx context.Context, env *Env, done func(key string, at time.Time)) error
	// Submitters returns n independent submitters (one client connection each).
	Submitters(ctx context.Context, n int) ([]submitFunc, error)
	WorkerPid() int
	// Stop closes the submitters and stops the worker (end of a round).
	Stop()
}

// stamper is implemented by targets whose rows record when the outcome was written
// (finished_at), to split the latency in two.
type stamper interface {
	FinishedAt(ctx context.Context, keys []string) (map[string]time.Time, error)
}

// connect opens a connection tagged with an application_name, so CPU accounting can tell the
// load generator's sessions from the worker's.
func connect(ctx context.Context, dsn, app string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = app
	return pgx.ConnectConfig(ctx, cfg)
}

// withApp adds application_name to a URL DSN.
func withApp(dsn, app string) string { return dsn + "&application_name=" + app }

// listen reports every notification on channel until ctx ends, timestamped on receipt.
func listen(ctx context.Context, dsn, channel string, done func(string, time.Time)) error {
	conn, err := connect(ctx, dsn, appClient)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("listen %s: %w", channel, err)
	}
	go func() {
		defer conn.Close(context.WithoutCancel(ctx))
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			done(n.Payload, time.Now())
		}
	}()
	return nil
}

// connSubmitters opens n connections and returns a submitter per connection running sql (one
// row, one text column: the key) in autocommit.
func connSubmitters(ctx context.Context, dsn, sql string, n int) ([]submitFunc, []*pgx.Conn, error) {
	var subs []submitFunc
	var conns []*pgx.Conn
	for range n {
		conn, err := connect(ctx, dsn, appClient)
		if err != nil {
			closeAll(conns)
			return nil, nil, err
		}
		conns = append(conns, conn)
		subs = append(subs, func(ctx context.Context) (string, error) {
			var key string
			err := conn.QueryRow(ctx, sql).Scan(&key)
			return key, err
		})
	}
	return subs, conns, nil
}

func closeAll(conns []*pgx.Conn) {
	for _, c := range conns {
		c.Close(context.Background())
	}
}

// finishedAt reads finished_at of the given request ids from table.
func finishedAt(ctx context.Context, dsn, table string, keys []string) (map[string]time.Time, error) {
	conn, err := connect(ctx, dsn, appMonitor)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT id::text, finished_at FROM `+table+` WHERE id = ANY($1::uuid[]) AND finished_at IS NOT NULL`, keys)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at
	}
	return out, rows.Err()
}

const (
	appClient  = "bench-client"  // load generator sessions (submit, LISTEN)
	appWorker  = "bench-worker"  // worker sessions not otherwise named
	appMonitor = "bench-monitor" // this program's bookkeeping
)
