package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets of the request histograms: 0.5 ms to ~2 min for queue wait, 1 ms to ~70 min for run
// time (a job or a 1000-table template copy runs for minutes).
var (
	queueWaitBuckets = prometheus.ExponentialBuckets(0.0005, 4, 10)
	runBuckets       = prometheus.ExponentialBuckets(0.001, 4, 12)
)

func newRequestMetrics() *Metrics {
	return &Metrics{
		requests: counterVec("requests_total",
			"Requests finished, by kind and outcome (succeeded, failed, cancelled).", "kind", "outcome"),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "request_queue_wait_seconds", Buckets: queueWaitBuckets,
			Help: "Time from a request's creation to the start of its last attempt, by kind.",
		}, []string{"kind"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "request_run_duration_seconds", Buckets: runBuckets,
			Help: "Time a request's handler ran until its outcome was written, by kind.",
		}, []string{"kind"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "requests_pending",
			Help: "Requests in status pending, by kind, from the sidecar's periodic count."}, []string{"kind"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "requests_running",
			Help: "Requests in status running, by kind, from the sidecar's periodic count."}, []string{"kind"}),
		backlogKinds: map[string]struct{}{},
	}
}

// Init exports every metric family at zero for the label values known at start: the request
// kinds served, every side-effect operation and result, runner outcomes, the usual crash signals,
// reconnecting components and slot re-creation reasons. A fresh sidecar's dashboard then shows
// zeros, not "No data".
func (m *Metrics) Init(kinds ...string) {
	if m == nil {
		return
	}
	zero := map[string]int{}
	for _, k := range kinds {
		for _, o := range []string{OutcomeSucceeded, OutcomeFailed, OutcomeCancelled} {
			m.requests.WithLabelValues(k, o)
		}
		m.queueWait.WithLabelValues(k)
		m.runDuration.WithLabelValues(k)
		zero[k] = 0
	}
	m.SetRequestBacklog(zero, zero)
	for _, op := range sideEffectOps {
		for _, r := range []string{ResultDone, ResultUnchanged, ResultRefused, ResultFailed} {
			m.sideEffects.WithLabelValues(op, r)
		}
	}
	for _, r := range []string{ResultDone, ResultFailed} {
		m.objectDeletes.WithLabelValues(r)
	}
	for _, o := range []string{RunnerSucceeded, RunnerFailed, RunnerCancelled, RunnerCrashed} {
		m.runnerJobs.WithLabelValues(o)
	}
	for _, sig := range []string{"SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS", "none"} {
		m.runnerCrashes.WithLabelValues(sig)
	}
	for _, l := range JobLimitLabels {
		m.limitsHit.WithLabelValues(l)
	}
	for _, p := range RunnerPhaseLabels {
		m.runnerPhases.WithLabelValues(p)
	}
	m.reconnects.WithLabelValues("replication")
	m.slotRecreations.WithLabelValues("missing")
}

// RequestFinished counts a finished request and observes its queue wait (creation to start of the
// attempt that finished it) and run time.
func (m *Metrics) RequestFinished(kind, outcome string, queueWait, run time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(kind, outcome).Inc()
	m.queueWait.WithLabelValues(kind).Observe(queueWait.Seconds())
	m.runDuration.WithLabelValues(kind).Observe(run.Seconds())
}

// SetRequestBacklog sets the pending and running gauges from a periodic count per kind. A kind
// seen before and missing now is set to 0 instead of disappearing, so graphs drop to zero.
func (m *Metrics) SetRequestBacklog(pending, running map[string]int) {
	if m == nil {
		return
	}
	m.backlogMu.Lock()
	defer m.backlogMu.Unlock()
	for k := range pending {
		m.backlogKinds[k] = struct{}{}
	}
	for k := range running {
		m.backlogKinds[k] = struct{}{}
	}
	for k := range m.backlogKinds {
		m.pending.WithLabelValues(k).Set(float64(pending[k]))
		m.running.WithLabelValues(k).Set(float64(running[k]))
	}
}
