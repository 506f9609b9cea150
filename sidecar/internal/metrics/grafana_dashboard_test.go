package metrics_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/grafana"
)

// The dashboard and the alert rules (package grafana) only name metrics the sidecar exports.

func TestEveryQueryNamesAnExportedMetric(t *testing.T) {
	exported := exportedNames(t)
	panels, err := grafana.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := grafana.AlertQueries()
	if err != nil {
		t.Fatal(err)
	}
	if len(panels) < 20 || len(alerts) < 5 {
		t.Fatalf("%d panel queries and %d alert expressions: the files did not parse as expected", len(panels), len(alerts))
	}
	for _, q := range append(panels, alerts...) {
		names, err := grafana.MetricNames(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Source, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", q.Source, q.Expr)
		}
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s: metric %s is not exported by sidecar/metrics (expr %q)", q.Source, n, q.Expr)
			}
		}
	}
}

func TestEveryMetricFamilyIsOnTheDashboard(t *testing.T) {
	panels, err := grafana.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, q := range panels {
		names, _ := grafana.MetricNames(q.Expr)
		for _, n := range names {
			used[strings.TrimSuffix(n, "_bucket")] = true
		}
	}
	for n := range exportedNames(t) {
		if strings.HasPrefix(n, "dataenv_") && !hasHistogramSuffix(n) && !used[n] {
			t.Errorf("%s is exported but no panel shows it", n)
		}
	}
}

func hasHistogramSuffix(n string) bool {
	return strings.HasSuffix(n, "_bucket") || strings.HasSuffix(n, "_sum") || strings.HasSuffix(n, "_count")
}
