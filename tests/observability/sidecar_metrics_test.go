// Package observability_test checks the running sidecar's metrics: counters after real requests,
// and a real Prometheus scraping it while every dashboard and alert query is evaluated.
package observability_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dataenv/dataenv/grafana"
	"github.com/dataenv/dataenv/tests/promtest"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"})
		return err
	})
}

// runningSidecar installs dataenv in a fresh database and starts a sidecar listening on a free
// port; it returns the control connection and the listen address.
func runningSidecar(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	db := pg.CreateDatabase(t)
	sidecartest.Install(t, pg.DSN(db))
	conn := pg.Connect(t, db)
	t.Cleanup(func() { sidecartest.DropSlot(conn) })
	addr := freeAddr(t)
	sidecartest.Start(t, sidecartest.Options{DSN: pg.DSN(db), HTTPAddr: addr})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return conn, addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar never became ready on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the family's series whose labels include want (counter, gauge, or a
// histogram's sample count).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func waitRequests(t *testing.T, conn *pgx.Conn, sql string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		var id, status string
		if err := conn.QueryRow(ctx, sql).Scan(&id); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if err := conn.QueryRow(ctx, `SELECT status FROM dataenv.wait($1, '30 s')`, id).Scan(&status); err != nil {
			t.Fatalf("wait request %d: %v", i, err)
		}
	}
}

func TestSidecarMetricsCountRealRequests(t *testing.T) {
	conn, addr := runningSidecar(t)
	if _, err := conn.Exec(context.Background(), `INSERT INTO dataenv.request_kinds (kind, description) VALUES ('test_nohandler', 'a kind no sidecar serves')`); err != nil {
		t.Fatal(err)
	}
	before := scrape(t, addr)
	if v := value(before, "dataenv_requests_total", map[string]string{"kind": "ping", "outcome": "succeeded"}); v != 0 {
		t.Fatalf("ping counter starts at %v, want 0", v)
	}
	waitRequests(t, conn, `SELECT dataenv.ping()`, 5)
	waitRequests(t, conn, `INSERT INTO dataenv.requests (kind) VALUES ('test_nohandler') RETURNING id`, 2)

	after := scrape(t, addr)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dataenv_requests_total", map[string]string{"kind": "ping", "outcome": "succeeded"}, 5},
		{"dataenv_requests_total", map[string]string{"kind": "test_nohandler", "outcome": "failed"}, 2},
		{"dataenv_request_run_duration_seconds", map[string]string{"kind": "ping"}, 5},
		{"dataenv_request_queue_wait_seconds", map[string]string{"kind": "ping"}, 5},
		{"dataenv_leader", nil, 1},
	}
	for _, c := range checks {
		if got := value(after, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for value(scrape(t, addr), "dataenv_replication_confirmed_lsn", nil) <= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("dataenv_replication_confirmed_lsn never moved")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestPrometheusEvaluatesEveryPanelAndAlertAgainstASidecar(t *testing.T) {
	conn, addr := runningSidecar(t)
	ctx := context.Background()
	_, file, _, _ := runtime.Caller(0)
	rules := filepath.Join(filepath.Dir(file), "..", "..", "grafana", "alerts", "dataenv.rules.yml")
	srv, err := promtest.Start(ctx, promtest.Config{Dir: t.TempDir(), Targets: []string{addr}, RuleFiles: []string{rules}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// A first scrape before the requests, so that rates see the counters move.
	if _, err := srv.WaitFor(ctx, `up{job="dataenv"} == 1`, promtest.NonEmpty); err != nil {
		t.Fatalf("Prometheus never scraped the sidecar: %v\n%s", err, srv.Log())
	}
	waitRequests(t, conn, `SELECT dataenv.ping()`, 20)
	if _, err := srv.WaitFor(ctx, `dataenv_requests_total{kind="ping",outcome="succeeded"} >= 20`, promtest.NonEmpty); err != nil {
		t.Fatalf("Prometheus never saw the sidecar's requests: %v\n%s", err, srv.Log())
	}
	dash, err := grafana.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := grafana.AlertQueries()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range promtest.CheckQueries(ctx, srv, append(dash, alerts...), promtest.CheckOptions{}) {
		if c.Err != nil {
			t.Errorf("%s: %v", c.Query.Source, c.Err)
		}
	}
	for _, expr := range []string{`dataenv_leader == 1`, `sum(rate(dataenv_requests_total[1m])) > 0`,
		`histogram_quantile(0.99, sum by (le) (rate(dataenv_request_run_duration_seconds_bucket[1m])))`} {
		if _, err := srv.WaitFor(ctx, expr, promtest.HasNumber); err != nil {
			t.Errorf("%s returned no data from the running sidecar: %v", expr, err)
		}
	}
}

// TestEveryDashboardMetricExistsOnAFreshSidecar: before any request, /metrics already has every
// family a dashboard panel or an alert selects (at zero), so a fresh install shows zeros, not
// "No data".
func TestEveryDashboardMetricExistsOnAFreshSidecar(t *testing.T) {
	_, addr := runningSidecar(t)
	fams := scrape(t, addr)
	dash, err := grafana.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := grafana.AlertQueries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append(dash, alerts...) {
		names, err := grafana.MetricNames(q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Source, err)
		}
		for _, n := range names {
			if !exported(fams, n) {
				t.Errorf("%s selects %s, which a fresh sidecar does not export", q.Source, n)
			}
		}
	}
}

// exported reports whether the scrape has a series of metric n (a histogram's _bucket, _sum and
// _count belong to the family of the base name).
func exported(fams map[string]*dto.MetricFamily, n string) bool {
	if f, ok := fams[n]; ok && len(f.GetMetric()) > 0 {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(n, suffix); ok {
			if f, ok := fams[base]; ok && len(f.GetMetric()) > 0 {
				return true
			}
		}
	}
	return false
}
