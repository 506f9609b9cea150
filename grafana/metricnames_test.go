package grafana_test

import (
	"reflect"
	"testing"

	"github.com/dataenv/dataenv/grafana"
)

func TestMetricNames(t *testing.T) {
	cases := map[string][]string{
		`sum by (kind, le) (rate(a_bucket{kind=~"run|x",le!="+Inf"}[$__rate_interval]))`: {"a_bucket"},
		`(sum(max_over_time(b[1m])) or vector(0)) < 1`:                                   {"b"},
		`x / on (instance) group_left (job) y offset 5m > bool 1e3`:                      {"x", "y"},
		`label_replace(up2, "dst", "$1 (z)", "src", "(.*)")`:                             {"up2"},
		`sum without (cpu) (rate(c:rec[5m])) > Inf`:                                      {"c:rec"},
		`histogram_quantile(0.95, sum(rate(d_bucket[5m])) by (le))`:                      {"d_bucket"},
	}
	for expr, want := range cases {
		got, err := grafana.MetricNames(expr)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("MetricNames(%q) = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, bad := range []string{`{__name__="x"}`, `rate(x[5m]`, `x{a="b}`} {
		if _, err := grafana.MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q): no error", bad)
		}
	}
}
