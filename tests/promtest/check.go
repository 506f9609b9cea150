package promtest

import (
	"context"
	"fmt"
	"time"

	"github.com/dataenv/dataenv/grafana"
)

// Checked is the outcome of evaluating one dashboard or alert query.
type Checked struct {
	Query  grafana.Query
	Series int   // series returned (1 for a scalar)
	Err    error // does not evaluate, or (with RequireData) no number arrived in time
}

// CheckOptions tunes CheckQueries.
type CheckOptions struct {
	// RateInterval replaces Grafana's $__rate_interval; "1m" when empty.
	RateInterval string
	// RequireData makes a query that never returns a number (see HasNumber) within Wait an error.
	// Without it, a query only has to evaluate.
	RequireData bool
	// Wait bounds the polling of one query for data; 30 s when zero.
	Wait time.Duration
}

// CheckQueries evaluates every query through /api/v1/query. Use it with grafana.DashboardQueries
// and grafana.AlertQueries, against a Prometheus scraping a sidecar (the test in package grafana
// drives a Metrics; an end-to-end test can point Config.Targets at a running sidecar).
func CheckQueries(ctx context.Context, s *Server, qs []grafana.Query, opt CheckOptions) []Checked {
	if opt.RateInterval == "" {
		opt.RateInterval = "1m"
	}
	if opt.Wait <= 0 {
		opt.Wait = 30 * time.Second
	}
	out := make([]Checked, 0, len(qs))
	for _, q := range qs {
		out = append(out, s.check(ctx, q, opt))
	}
	return out
}

func (s *Server) check(ctx context.Context, q grafana.Query, opt CheckOptions) Checked {
	expr := grafana.Expand(q.Expr, opt.RateInterval)
	r, err := s.Query(ctx, expr)
	if err != nil {
		return Checked{Query: q, Err: fmt.Errorf("does not evaluate: %w", err)}
	}
	if opt.RequireData {
		qctx, cancel := context.WithTimeout(ctx, opt.Wait)
		defer cancel()
		if r, err = s.WaitFor(qctx, expr, HasNumber); err != nil {
			return Checked{Query: q, Series: r.Len(), Err: fmt.Errorf("no data: %w", err)}
		}
	}
	return Checked{Query: q, Series: r.Len()}
}
