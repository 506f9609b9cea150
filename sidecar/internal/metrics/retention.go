package metrics

// addRetentionMetrics adds the counter of finished requests the retention pass deleted
// (sidecar/internal/retention), by installation: control, or satellite (all satellites together).
func (m *Metrics) addRetentionMetrics() {
	m.requestsPruned = counterVec("requests_pruned_total",
		"Finished requests deleted past --request-retention, by installation (control, or satellite: all satellites together).",
		"installation")
	for _, inst := range []string{"control", "satellite"} {
		m.requestsPruned.WithLabelValues(inst)
	}
}

// RequestsPruned counts n finished requests deleted in an installation of kind installation.
func (m *Metrics) RequestsPruned(installation string, n int64) {
	if m == nil {
		return
	}
	m.requestsPruned.WithLabelValues(installation).Add(float64(n))
}
