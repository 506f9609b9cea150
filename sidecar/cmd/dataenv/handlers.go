package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/cluster"
	"github.com/dataenv/dataenv/sidecar/job"
	"github.com/dataenv/dataenv/sidecar/lake"
	"github.com/dataenv/dataenv/sidecar/metrics"
	"github.com/dataenv/dataenv/sidecar/request"
	"github.com/dataenv/dataenv/sidecar/testkinds"
	"github.com/dataenv/dataenv/sidecar/workspace"
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
	lakeHooks, err := job.Setup(context.Background(), pool, reg, m)
	if err != nil {
		return err
	}
	// Workspaces and forks: create_fork, drop_fork (the lake side of a fork's cleanup through lakeHooks).
	if err := workspace.Register(reg, workspace.Config{Control: pool, Clusters: admin, Metrics: m,
		Cleaners: []workspace.ForkCleaner{lakeHooks}, BlocksCreate: lake.BlocksCreate}); err != nil {
		return err
	}
	return nil
}
