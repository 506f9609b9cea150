package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Rescue reasons, the values of the reason label of dataenv_requests_rescued_total (the same
// words as sidecar/internal/rescuer's Reason* constants).
var rescueReasons = []string{"pending", "running"}

func (m *Metrics) addRescuerMetrics() {
	m.rescued = counterVec("requests_rescued_total",
		"Unfinished requests no worker held, handed to the dispatcher again by the rescuer, by reason "+
			"(pending: a missed wake-up; running: an attempt no live worker holds).", "reason")
	m.oldestUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace,
		Name: "oldest_unfinished_request_age_seconds",
		Help: "Age of the oldest pending and of the oldest running request (0 when there is none), from the leader's rescuer sweep.",
	}, []string{"status"})
	for _, r := range rescueReasons {
		m.rescued.WithLabelValues(r)
	}
	m.SetOldestUnfinished(0, 0)
}

// RequestRescued counts a rescue.
func (m *Metrics) RequestRescued(reason string) {
	if m == nil {
		return
	}
	m.rescued.WithLabelValues(reason).Inc()
}

// SetOldestUnfinished sets the ages of the oldest pending and running requests.
func (m *Metrics) SetOldestUnfinished(pending, running time.Duration) {
	if m == nil {
		return
	}
	m.oldestUnfinished.WithLabelValues("pending").Set(pending.Seconds())
	m.oldestUnfinished.WithLabelValues("running").Set(running.Seconds())
}
