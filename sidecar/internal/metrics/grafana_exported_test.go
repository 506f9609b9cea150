package metrics_test

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/dataenv/dataenv/sidecar/internal/metrics"
)

// exportedNames builds the sidecar's registry, touches every metrics method once and returns
// every name a query may select: each family, plus _bucket/_sum/_count for histograms and
// summaries.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := metrics.NewRegistry()
	metrics.New(reg).TouchAll()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[mf.GetName()+"_bucket"] = true
			fallthrough
		case dto.MetricType_SUMMARY:
			names[mf.GetName()+"_sum"] = true
			names[mf.GetName()+"_count"] = true
		}
	}
	return names
}
