package metrics_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/dataenv/dataenv/sidecar/internal/metrics"
)

// families lists every dataenv_ family the sidecar exports, with its type.
var families = map[string]string{
	"dataenv_requests_total":                        "counter",
	"dataenv_request_queue_wait_seconds":            "histogram",
	"dataenv_request_run_duration_seconds":          "histogram",
	"dataenv_requests_pending":                      "gauge",
	"dataenv_requests_running":                      "gauge",
	"dataenv_replication_lag_bytes":                 "gauge",
	"dataenv_replication_lag_seconds":               "gauge",
	"dataenv_replication_confirmed_lsn":             "gauge",
	"dataenv_replication_slot_retained_wal_bytes":   "gauge",
	"dataenv_replication_slot_recreations_total":    "counter",
	"dataenv_leader":                                "gauge",
	"dataenv_reconnects_total":                      "counter",
	"dataenv_side_effects_total":                    "counter",
	"dataenv_lifecycle_lock_wait_seconds":           "histogram",
	"dataenv_objectstore_deleted_objects_total":     "counter",
	"dataenv_runner_jobs_total":                     "counter",
	"dataenv_runner_job_duration_seconds":           "histogram",
	"dataenv_runner_job_phase_seconds":              "histogram",
	"dataenv_runner_spill_stops_total":              "counter",
	"dataenv_runner_crashes_total":                  "counter",
	"dataenv_requests_rescued_total":                "counter",
	"dataenv_oldest_unfinished_request_age_seconds": "gauge",
	"dataenv_job_limits_hit_total":                  "counter",
	"dataenv_fork_expirations_total":                "counter",
	"dataenv_requests_pruned_total":                 "counter",
	"dataenv_satellite_connections_open":            "gauge",
	"dataenv_satellite_connections_in_use":          "gauge",
}

func TestEveryFamilyExportedAndLintClean(t *testing.T) {
	reg := metrics.NewRegistry()
	m := metrics.New(reg)
	m.TouchAll()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var process, goRuntime bool
	for _, mf := range mfs {
		name := mf.GetName()
		switch {
		case strings.HasPrefix(name, "dataenv_"):
			got[name] = strings.ToLower(mf.GetType().String())
		case strings.HasPrefix(name, "process_"):
			process = true
		case strings.HasPrefix(name, "go_"):
			goRuntime = true
		}
	}
	for name, typ := range families {
		if got[name] != typ {
			t.Errorf("family %s: got type %q, want %q", name, got[name], typ)
		}
	}
	for name := range got {
		if _, ok := families[name]; !ok {
			t.Errorf("family %s exported but not listed in this test", name)
		}
	}
	if !goRuntime {
		t.Error("no go_ families: Go collector missing")
	}
	if !process {
		t.Error("no process_ families: process collector missing")
	}

	// The whole registry (dataenv_, process_ and go_ families) must be promlint clean.
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Fatalf("promlint problems: %v", problems)
	}
}

func TestCountersAndHistogramsMove(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Init("create_fork")
	m.RequestFinished("create_fork", metrics.OutcomeSucceeded, 10*time.Millisecond, time.Second)
	m.RequestFinished("create_fork", metrics.OutcomeSucceeded, 20*time.Millisecond, 2*time.Second)
	m.RequestFinished("create_fork", metrics.OutcomeFailed, 0, 0)
	m.SideEffect("drop_database", metrics.ResultRefused)
	m.ObjectsDeleted(metrics.ResultDone, 5)
	m.ObjectsDeleted(metrics.ResultDone, 0)
	m.SetLeader(true)
	m.SetConfirmedLSN(0x1_0000_0028)

	want := `
# HELP dataenv_requests_total Requests finished, by kind and outcome (succeeded, failed, cancelled).
# TYPE dataenv_requests_total counter
dataenv_requests_total{kind="create_fork",outcome="cancelled"} 0
dataenv_requests_total{kind="create_fork",outcome="failed"} 1
dataenv_requests_total{kind="create_fork",outcome="succeeded"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "dataenv_requests_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "dataenv_request_run_duration_seconds"); err != nil || n != 1 {
		t.Errorf("run duration series: %d (%v), want 1", n, err)
	}
	assertSampleCount(t, reg, "dataenv_request_run_duration_seconds", 3)
	assertSampleCount(t, reg, "dataenv_request_queue_wait_seconds", 3)
	assertValue(t, reg, "dataenv_objectstore_deleted_objects_total", 5)
	assertValue(t, reg, "dataenv_side_effects_total", 1)
	assertValue(t, reg, "dataenv_leader", 1)
	assertValue(t, reg, "dataenv_replication_confirmed_lsn", float64(0x1_0000_0028))
	m.SetLeader(false)
	assertValue(t, reg, "dataenv_leader", 0)
}

func TestBacklogKindsDropToZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.SetRequestBacklog(map[string]int{"run": 3, "ping": 1}, map[string]int{"run": 1})
	m.SetRequestBacklog(map[string]int{"ping": 2}, nil)
	want := `
# HELP dataenv_requests_pending Requests in status pending, by kind, from the sidecar's periodic count.
# TYPE dataenv_requests_pending gauge
dataenv_requests_pending{kind="ping"} 2
dataenv_requests_pending{kind="run"} 0
# HELP dataenv_requests_running Requests in status running, by kind, from the sidecar's periodic count.
# TYPE dataenv_requests_running gauge
dataenv_requests_running{kind="ping"} 0
dataenv_requests_running{kind="run"} 0
`
	err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"dataenv_requests_pending", "dataenv_requests_running")
	if err != nil {
		t.Error(err)
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *metrics.Metrics
	m.TouchAll() // must not panic
}

func assertSampleCount(t *testing.T, g prometheus.Gatherer, name string, want uint64) {
	t.Helper()
	var total uint64
	for _, m := range family(t, g, name).GetMetric() {
		total += m.GetHistogram().GetSampleCount()
	}
	if total != want {
		t.Errorf("%s sample count %d, want %d", name, total, want)
	}
}

func assertValue(t *testing.T, g prometheus.Gatherer, name string, want float64) {
	t.Helper()
	var sum float64
	for _, m := range family(t, g, name).GetMetric() {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	if sum != want {
		t.Errorf("%s = %v, want %v", name, sum, want)
	}
}

func family(t *testing.T, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(mfs))
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
		names = append(names, mf.GetName())
	}
	sort.Strings(names)
	t.Fatalf("family %s not gathered; have %v", name, names)
	return nil
}
