package job

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/cluster"
	"github.com/dataenv/dataenv/sidecar/lake"
	"github.com/dataenv/dataenv/sidecar/metrics"
	"github.com/dataenv/dataenv/sidecar/request"
)

// Setup builds the lake resolver and the job handlers on the control pool, registers the run and
// materialize kinds, and returns the lake hooks the fork requests call (lake.Hooks).
func Setup(_ context.Context, pool *pgxpool.Pool, reg *request.Registry, m *metrics.Metrics) (*lake.Hooks, error) {
	log := slog.Default()
	admin, err := cluster.New(cluster.Config{Control: pool, ControlDSN: pool.Config().ConnString(), Logger: log, Metrics: m})
	if err != nil {
		return nil, fmt.Errorf("lake jobs: %w", err)
	}
	registry := lake.NewRegistry(pool, admin, 0)
	resolver := &lake.Resolver{Control: pool, Clusters: admin, Registry: registry,
		Datatables: lake.SQLDatatables{Control: pool}, Logger: log}
	h, err := New(Config{Control: pool, Resolver: resolver, Logger: log, Metrics: m})
	if err != nil {
		return nil, err
	}
	h.Register(reg)
	hooks := lake.NewHooks(pool, admin, registry, log)
	hooks.Metrics = m
	return hooks, nil
}
