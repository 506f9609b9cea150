package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/app"
)

func runSidecar(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlags("sidecar", "Runs the dataenv sidecar: one leader performs requests, other instances wait as hot standbys.")
	dsn := fs.String("dsn", "", "control database connection string (the role that ran install)")
	sc := sidecarFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDSN(*dsn); err != nil {
		return err
	}
	cfg, err := sc.config()
	if err != nil {
		return err
	}
	cfg.DSN = *dsn
	return app.Run(ctx, cfg)
}

// sidecarOptions are the flags every command that runs a sidecar shares (sidecar, dev).
type sidecarOptions struct {
	httpAddr, grace, logLevel, isolation, runnerPath, pgToolsDirs *string
	rescueInterval, rescueAfter, retryWindow                      *string
	concurrency                                                   *int
}

func sidecarFlags(fs flagSet) sidecarOptions {
	return sidecarOptions{
		httpAddr:    fs.String("http-addr", "127.0.0.1:9750", "listen address of /metrics, /healthz and /readyz (\"-\" disables)"),
		concurrency: fs.Int("concurrency", 8, "requests run in parallel"),
		grace:       fs.String("shutdown-grace", "30s", "on SIGTERM, how long running requests may take to finish"),
		logLevel:    fs.String("log-level", "info", "debug, info, warn or error"),
		isolation:   fs.String("job-isolation", "", "isolation of DuckDB jobs: jailed, unshare or plain (default: jailed when bubblewrap is installed)"),
		runnerPath:  fs.String("runner-path", "", "the dataenv-runner binary (default: next to dataenv)"),
		rescueInterval: fs.String("rescue-interval", "2s",
			"period of the leader's sweep that re-dispatches unfinished requests no worker holds"),
		rescueAfter: fs.String("rescue-after", "2s",
			"age (pending: since creation; running: since the last update) past which the sweep re-dispatches a request no worker holds"),
		retryWindow: fs.String("retry-window", "30m",
			"how long a request hitting transient faults (lost connections, restarts, lock timeouts) is retried before it fails"),
		pgToolsDirs: fs.String("pg-tools-dirs", "", "directories (':'-separated) searched first for pg_dump, pg_restore and psql; "+
			"each cluster's copies use tools at least as new as its server (then /usr/lib/postgresql/*/bin and PATH are searched)"),
	}
}

func (o sidecarOptions) config() (app.Config, error) {
	var d [4]time.Duration
	for i, f := range []struct{ name, v string }{{"shutdown-grace", *o.grace}, {"rescue-interval", *o.rescueInterval},
		{"rescue-after", *o.rescueAfter}, {"retry-window", *o.retryWindow}} {
		var err error
		if d[i], err = time.ParseDuration(f.v); err != nil || d[i] <= 0 {
			return app.Config{}, fmt.Errorf("--%s: %q is not a positive duration (for example 2s, 30m)", f.name, f.v)
		}
	}
	return app.Config{HTTPAddr: *o.httpAddr, Concurrency: *o.concurrency, ShutdownGrace: d[0],
		RescueInterval: d[1], RescueAfter: d[2], RetryWindow: d[3],
		Logger: newLogger(*o.logLevel), JobIsolation: client.Isolation(*o.isolation), RunnerPath: *o.runnerPath,
		PGToolsDirs: filepath.SplitList(*o.pgToolsDirs)}, nil
}
