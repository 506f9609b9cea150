package metrics

import "github.com/prometheus/client_golang/prometheus"

// addExpiryMetrics adds the counter of fork expirations (sidecar/internal/expiry).
func (m *Metrics) addExpiryMetrics() {
	m.forkExpirations = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "fork_expirations_total",
		Help: "drop_fork requests the leader filed for expired forks (create_fork's expires_in, dataenv.set_fork_expiry)."})
}

// ForkExpired counts a drop_fork filed for an expired fork.
func (m *Metrics) ForkExpired() {
	if m == nil {
		return
	}
	m.forkExpirations.Inc()
}
