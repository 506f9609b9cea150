package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dataenv/dataenv/grafana"
	"github.com/dataenv/dataenv/sidecar/internal/httpserver"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/tests/promtest"
)

// kinds driven by the test: one per dashboard row (ping in the overview, clusters, forks, jobs).
var drivenKinds = []string{"ping", "setup_cluster", "create_database", "create_fork", "drop_fork", "run", "materialize"}

// TestDashboardAndAlertsOnRealPrometheus starts Debian's Prometheus scraping the sidecar's HTTP
// server every second, drives every metric so that every panel has data and every alert fires,
// then evaluates each panel query and alert expression through /api/v1/query.
func TestDashboardAndAlertsOnRealPrometheus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	reg := metrics.NewRegistry()
	m := metrics.New(reg)
	m.Init(drivenKinds...)
	srv := httpserver.New(httpserver.Config{Addr: "127.0.0.1:0", Gatherer: reg, Logger: slog.New(slog.DiscardHandler)})
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	stopDriving := drive(m)
	defer stopDriving()

	rules := filepath.Join(t.TempDir(), "dataenv.rules.yml")
	if err := os.WriteFile(rules, grafana.RulesYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	prom, err := promtest.Start(ctx, promtest.Config{
		Dir:       t.TempDir(),
		Targets:   []string{srv.Addr()},
		RuleFiles: []string{rules},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := prom.Stop(); err != nil {
			t.Error(err)
		}
	}()

	// Data arrives once two scrapes have happened (rates need two samples).
	if _, err := prom.WaitFor(ctx, `count_over_time(dataenv_leader[1m]) >= 3`, promtest.NonEmpty); err != nil {
		t.Fatalf("no scrapes arrived: %v\n%s", err, prom.Log())
	}
	checkTheCheckerRejects(ctx, t, prom)
	checkQueries(ctx, t, prom)
	checkAlertsFire(ctx, t, prom)
}

// checkTheCheckerRejects proves the checks are not vacuous: a syntax error and an unknown metric
// both fail CheckQueries.
func checkTheCheckerRejects(ctx context.Context, t *testing.T, prom *promtest.Server) {
	bad := []grafana.Query{
		{Source: "syntax error", Expr: "sum(rate(dataenv_requests_total[1m])"},
		{Source: "unknown metric", Expr: "dataenv_no_such_metric"},
	}
	opt := promtest.CheckOptions{RequireData: true, Wait: time.Second}
	for _, c := range promtest.CheckQueries(ctx, prom, bad, opt) {
		if c.Err == nil {
			t.Errorf("%s: accepted by CheckQueries", c.Query.Source)
		}
	}
}

func checkQueries(ctx context.Context, t *testing.T, prom *promtest.Server) {
	panels, err := grafana.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := grafana.AlertQueries()
	if err != nil {
		t.Fatal(err)
	}
	checked := promtest.CheckQueries(ctx, prom, append(panels, alerts...), promtest.CheckOptions{RequireData: true})
	for _, c := range checked {
		if c.Err != nil {
			t.Errorf("%s: %v", c.Query.Source, c.Err)
			continue
		}
		t.Logf("%s: %d series", c.Query.Source, c.Series)
	}
}

// checkAlertsFire waits until every rule evaluated healthy and shows up in ALERTS.
func checkAlertsFire(ctx context.Context, t *testing.T, prom *promtest.Server) {
	alerts, err := grafana.AlertQueries()
	if err != nil {
		t.Fatal(err)
	}
	health, err := prom.RuleHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range alerts {
		name := q.Source[len("alert "):]
		if _, ok := health[name]; !ok {
			t.Errorf("%s: not loaded by Prometheus (loaded: %v)", q.Source, health)
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := prom.WaitFor(qctx, fmt.Sprintf(`ALERTS{alertname=%q}`, name), promtest.NonEmpty)
		cancel()
		if err != nil {
			h, _ := prom.RuleHealth(ctx)
			t.Errorf("%s: never pending or firing (health %q): %v", q.Source, h[name], err)
		}
	}
	health, err = prom.RuleHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range health {
		if h != "ok" {
			t.Errorf("rule %s: health %s", name, h)
		}
	}
}

// drive moves every metric every 100 ms with values that make every panel non-empty and every
// alert condition true (no leader, lag, retained WAL, failures, backlog, lock waits, crashes).
func drive(m *metrics.Metrics) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var lsn uint64 = 0x1000000
		for {
			driveOnce(m, lsn)
			lsn += 8192
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func driveOnce(m *metrics.Metrics, lsn uint64) {
	pending := map[string]int{}
	for i, k := range drivenKinds {
		m.RequestFinished(k, metrics.OutcomeSucceeded, 5*time.Millisecond, time.Duration(i+1)*20*time.Millisecond)
		m.RequestFinished(k, metrics.OutcomeFailed, 50*time.Millisecond, 10*time.Millisecond)
		pending[k] = 200
	}
	m.SetRequestBacklog(pending, map[string]int{"run": 1, "create_fork": 1, "setup_cluster": 1})
	m.SetReplicationLag(2<<30, 10*time.Minute)
	m.SetConfirmedLSN(lsn)
	m.SetRetainedWAL(20 << 30)
	m.SlotRecreated("invalidated")
	m.SetLeader(false)
	m.Reconnect("replication")
	m.SideEffect("create_database", metrics.ResultDone)
	m.SideEffect("drop_schema", metrics.ResultRefused)
	m.LockWait(2 * time.Minute)
	m.ObjectsDeleted(metrics.ResultDone, 3)
	m.RunnerJobFinished(metrics.RunnerSucceeded, 300*time.Millisecond)
	m.RunnerJobFinished(metrics.RunnerCrashed, 2*time.Second)
	for _, phase := range metrics.RunnerPhaseLabels {
		m.RunnerPhase(phase, 20*time.Millisecond)
	}
	m.RunnerSpillStop()
	m.RunnerCrash("SIGKILL")
	m.RequestRescued("pending")
	m.SetOldestUnfinished(20*time.Minute, time.Minute)
}
