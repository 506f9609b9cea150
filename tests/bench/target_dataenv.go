package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
)

func init() { RegisterWorker("dataenv", runDataenvWorker) }

// runDataenvWorker replaces the worker subprocess with the shipped dataenv binary (same pid, so
// its CPU time is measured as the worker's), running the sidecar with its default settings (8
// handlers, batched outcomes). The binary's path comes from the parent (BENCH_DATAENV_BIN).
func runDataenvWorker(_ context.Context, dsn string, _ io.Writer) error {
	bin := os.Getenv("BENCH_DATAENV_BIN")
	if bin == "" {
		return errors.New("BENCH_DATAENV_BIN is not set")
	}
	return syscall.Exec(bin, []string{"dataenv", "sidecar", "--dsn", dsn, "--http-addr", "-", "--log-level", "warn"}, os.Environ())
}

// newDataenvTarget: SELECT dataenv.ping() in autocommit; completion = NOTIFY on
// dataenv_request_finished from the outcome trigger.
func newDataenvTarget() *notifyTarget {
	return &notifyTarget{name: "dataenv", db: "bench_dataenv", worker: "dataenv",
		channel: "dataenv_request_finished", submitSQL: `SELECT dataenv.ping()::text`, table: "dataenv.requests",
		setup: func(ctx context.Context, conn *pgx.Conn) error {
			bin, err := dataenvBinary(ctx)
			if err != nil {
				return err
			}
			os.Setenv("BENCH_DATAENV_BIN", bin) // the worker subprocess execs it
			if _, err := install.Install(ctx, conn, install.Options{Logger: quietLogger("install")}); err != nil {
				return fmt.Errorf("install dataenv: %w", err)
			}
			return nil
		}}
}
