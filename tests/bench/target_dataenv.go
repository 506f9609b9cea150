package main

import (
	"context"
	"fmt"
	"io"

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

// newDataenvTarget: SELECT dataenv.ping() in autocommit; completion = NOTIFY on
// dataenv_request_finished from the outcome trigger.
func newDataenvTarget() *notifyTarget {
	return &notifyTarget{name: "dataenv", db: "bench_dataenv", worker: "dataenv",
		channel: "dataenv_request_finished", submitSQL: `SELECT dataenv.ping()::text`, table: "dataenv.requests",
		setup: func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := install.Install(ctx, conn, install.Options{Logger: quietLogger("install")}); err != nil {
				return fmt.Errorf("install dataenv: %w", err)
			}
			return nil
		}}
}
