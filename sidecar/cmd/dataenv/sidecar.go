package main

import (
	"context"
	"io"
	"time"

	"github.com/dataenv/dataenv/sidecar/daemon"
)

func runSidecar(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlags("sidecar", "Runs the dataenv sidecar: one leader performs requests, other instances wait as hot standbys.")
	dsn := fs.String("dsn", "", "control database connection string (the role that ran install)")
	httpAddr := fs.String("http-addr", "127.0.0.1:9750", "listen address of /metrics, /healthz and /readyz (\"-\" disables)")
	concurrency := fs.Int("concurrency", 8, "requests run in parallel")
	grace := fs.String("shutdown-grace", "30s", "on SIGTERM, how long running requests may take to finish")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDSN(*dsn); err != nil {
		return err
	}
	g, err := time.ParseDuration(*grace)
	if err != nil {
		return err
	}
	return daemon.Run(ctx, daemon.Config{DSN: *dsn, HTTPAddr: *httpAddr, Concurrency: *concurrency,
		ShutdownGrace: g, Logger: newLogger(*logLevel), Setup: setupHandlers})
}
