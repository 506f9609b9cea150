package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/metrics"
	"github.com/dataenv/dataenv/sidecar/request"
	"github.com/dataenv/dataenv/sidecar/testkinds"
)

// setupHandlers registers every request kind's handler: the one place that knows them all.
func setupHandlers(_ context.Context, pool *pgxpool.Pool, reg *request.Registry, _ *metrics.Metrics) error {
	testkinds.Register(reg, pool)
	return nil
}
