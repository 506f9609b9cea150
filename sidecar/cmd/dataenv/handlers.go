package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/cluster"
	"github.com/dataenv/dataenv/sidecar/job"
	"github.com/dataenv/dataenv/sidecar/metrics"
	"github.com/dataenv/dataenv/sidecar/request"
	"github.com/dataenv/dataenv/sidecar/testkinds"
)

// setupHandlers registers every request kind's handler: the one place that knows them all.
func setupHandlers(_ context.Context, pool *pgxpool.Pool, reg *request.Registry, m *metrics.Metrics) error {
	testkinds.Register(reg, pool)
	// External clusters: setup, databases, datatable roles.
	admin, err := cluster.New(cluster.Config{Control: pool, ControlDSN: pool.Config().ConnString(), Metrics: m, Logger: slog.Default()})
	if err != nil {
		return err
	}
	admin.Register(reg)
	// Lakes and DuckDB jobs: run, materialize; lakeHooks are the fork requests' lake side.
	lakeHooks, err := job.Setup(context.Background(), pool, reg, nil)
	if err != nil {
		return err
	}
	_ = lakeHooks
	return nil
}
