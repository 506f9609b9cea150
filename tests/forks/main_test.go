// Package forks_test proves workspaces, fork chains and datatable forks end to end: SQL in a real
// control database, a real sidecar process, a second real cluster administered by a
// non-superuser admin.
package forks_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/cluster"
	"github.com/dataenv/dataenv/sidecar/daemon"
	"github.com/dataenv/dataenv/sidecar/metrics"
	"github.com/dataenv/dataenv/sidecar/request"
	"github.com/dataenv/dataenv/sidecar/workspace"
	"github.com/dataenv/dataenv/tests/testenv"
)

// control holds the control databases (and is the "instance" cluster); external is administered
// by a non-superuser CREATEDB CREATEROLE admin.
var control, external *testenv.Postgres

const sidecarEnv = "DATAENV_FORKS_TEST_SIDECAR"

func TestMain(m *testing.M) {
	if os.Getenv(sidecarEnv) == "1" {
		os.Exit(runSidecar()) // this test binary re-executed as a sidecar
	}
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if control, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		external, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "external"})
		return err
	})
}

// runSidecar runs the daemon with the cluster and workspace handlers, as the dataenv binary's
// composition root does.
func runSidecar() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dsn := os.Getenv("DATAENV_DSN")
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	err := daemon.Run(ctx, daemon.Config{DSN: dsn, HTTPAddr: "-", Logger: log,
		Setup: func(ctx context.Context, pool *pgxpool.Pool, reg *request.Registry, m *metrics.Metrics) error {
			a, err := cluster.New(cluster.Config{Control: pool, ControlDSN: dsn, Logger: log, Metrics: m})
			if err != nil {
				return err
			}
			a.Register(reg)
			return workspace.Setup(ctx, pool, reg, m)
		}})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "sidecar:", err)
		return 1
	}
	return 0
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
