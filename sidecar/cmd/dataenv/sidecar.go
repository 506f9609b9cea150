package main

import (
	"context"
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
		pgToolsDirs: fs.String("pg-tools-dirs", "", "directories (':'-separated) searched first for pg_dump, pg_restore and psql; "+
			"each cluster's copies use tools at least as new as its server (then /usr/lib/postgresql/*/bin and PATH are searched)"),
	}
}

func (o sidecarOptions) config() (app.Config, error) {
	g, err := time.ParseDuration(*o.grace)
	if err != nil {
		return app.Config{}, err
	}
	return app.Config{HTTPAddr: *o.httpAddr, Concurrency: *o.concurrency, ShutdownGrace: g,
		Logger: newLogger(*o.logLevel), JobIsolation: client.Isolation(*o.isolation), RunnerPath: *o.runnerPath,
		PGToolsDirs: filepath.SplitList(*o.pgToolsDirs)}, nil
}
