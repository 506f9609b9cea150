package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's settings under test. Default: River's fetch defaults (FetchCooldown 100 ms,
// FetchPollInterval 1 s) with the MaxWorkers of River's own examples. Tuned: fetch as often as
// River allows and a larger queue.
var riverConfigs = map[string]func(*river.Config){
	"river-default": func(c *river.Config) {
		c.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}
	},
	"river-tuned": func(c *river.Config) {
		c.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1000}}
		c.FetchCooldown = time.Millisecond
		c.FetchPollInterval = 5 * time.Millisecond
	},
}

func init() {
	for name, tune := range riverConfigs {
		RegisterWorker(name, func(ctx context.Context, dsn string, out io.Writer) error {
			return runRiverWorker(ctx, dsn, tune, out)
		})
	}
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func riverWorkers() *river.Workers {
	w := river.NewWorkers()
	river.AddWorker(w, noopWorker{})
	return w
}

// runRiverWorker works the queue and writes "JOBID UNIXNANO" for every job_completed event,
// stamped when the event is received (River emits it after the completion batch committed).
func runRiverWorker(ctx context.Context, dsn string, tune func(*river.Config), out io.Writer) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := &river.Config{Workers: riverWorkers(), Logger: quietLogger("river")}
	tune(cfg)
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: 1 << 20})
	defer cancel()
	if err := client.Start(ctx); err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<16)
	for {
		select {
		case <-ctx.Done():
			_ = w.Flush()
			return client.Stop(context.WithoutCancel(ctx))
		case ev := <-events:
			fmt.Fprintf(w, "%d %d\n", ev.Job.ID, time.Now().UnixNano())
			if len(events) == 0 {
				if err := w.Flush(); err != nil {
					return err
				}
			}
		}
	}
}

// riverTarget: an insert-only River client (client.Insert, one transaction per job, as an
// application would); completion = the worker's job_completed event.
type riverTarget struct {
	worker string
	dsn    string
	proc   *Worker
	pool   *pgxpool.Pool
}

func (t *riverTarget) Name() string {
	return map[string]string{"river-default": "River (default)", "river-tuned": "River (tuned)"}[t.worker]
}
func (t *riverTarget) DB() string     { return "bench_" + strings.ReplaceAll(t.worker, "-", "_") }
func (t *riverTarget) WorkerPid() int { return t.proc.Pid() }

func (t *riverTarget) Prepare(ctx context.Context, env *Env) error {
	dsn, err := env.CreateDatabase(ctx, t.DB())
	if err != nil {
		return err
	}
	t.dsn = dsn
	pool, err := pgxpool.New(ctx, withApp(dsn, appMonitor))
	if err != nil {
		return err
	}
	defer pool.Close()
	mig, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quietLogger("rivermigrate")})
	if err != nil {
		return err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	return nil
}

func (t *riverTarget) Start(ctx context.Context, env *Env, done func(string, time.Time)) error {
	var err error
	t.proc, err = env.StartWorker(ctx, t.worker, withApp(t.dsn, appWorker), func(line string) {
		id, ns, ok := strings.Cut(line, " ")
		if n, err := strconv.ParseInt(ns, 10, 64); ok && err == nil {
			done(id, time.Unix(0, n))
		}
	})
	return err
}

func (t *riverTarget) Submitters(ctx context.Context, n int) ([]submitFunc, error) {
	cfg, err := pgxpool.ParseConfig(withApp(t.dsn, appClient))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns, cfg.MinConns = int32(n), int32(n)
	if t.pool != nil {
		t.pool.Close()
	}
	t.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(t.pool), &river.Config{Workers: riverWorkers(), Logger: quietLogger("river-insert")})
	if err != nil {
		return nil, err
	}
	sub := func(ctx context.Context) (string, error) {
		res, err := client.Insert(ctx, noopArgs{}, nil)
		if err != nil {
			return "", err
		}
		return strconv.FormatInt(res.Job.ID, 10), nil
	}
	subs := make([]submitFunc, n)
	for i := range subs {
		subs[i] = sub
	}
	return subs, nil
}

func (t *riverTarget) Stop() {
	if t.pool != nil {
		t.pool.Close()
		t.pool = nil
	}
	if t.proc != nil {
		if err := t.proc.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s worker: %v\n", t.worker, err)
		}
		t.proc = nil
	}
}
