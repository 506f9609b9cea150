// Package metrics holds the sidecar's Prometheus metrics: one Metrics value built on a private
// registry, with a typed method per event. Every name carries the dataenv_ prefix and base units
// (seconds, bytes). Every method is safe on a nil *Metrics, so packages and tests that do not care
// about metrics pass nil.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every metric name.
const Namespace = "dataenv"

// Request outcomes, the values of the outcome label of dataenv_requests_total.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// Side-effect and delete results, the values of the result labels.
const (
	ResultDone      = "done"
	ResultUnchanged = "unchanged"
	ResultRefused   = "refused"
	ResultFailed    = "failed"
)

// Metrics is the sidecar's set of collectors. Build it with New; the zero value is not usable,
// a nil pointer is (every method does nothing).
type Metrics struct {
	requests         *prometheus.CounterVec
	queueWait        *prometheus.HistogramVec
	runDuration      *prometheus.HistogramVec
	pending          *prometheus.GaugeVec
	running          *prometheus.GaugeVec
	lagBytes         prometheus.Gauge
	lagSeconds       prometheus.Gauge
	confirmedLSN     prometheus.Gauge
	retainedWAL      prometheus.Gauge
	slotRecreations  *prometheus.CounterVec
	leader           prometheus.Gauge
	reconnects       *prometheus.CounterVec
	sideEffects      *prometheus.CounterVec
	lockWait         prometheus.Histogram
	runnerJobs       *prometheus.CounterVec
	runnerDuration   prometheus.Histogram
	runnerPhases     *prometheus.HistogramVec
	spillStops       prometheus.Counter
	runnerCrashes    *prometheus.CounterVec
	objectDeletes    *prometheus.CounterVec
	rescued          *prometheus.CounterVec
	oldestUnfinished *prometheus.GaugeVec
	limitsHit        *prometheus.CounterVec
	forkExpirations  prometheus.Counter
	requestsPruned   *prometheus.CounterVec
	satellites       satelliteGauges

	backlogMu    sync.Mutex
	backlogKinds map[string]struct{}
}

// NewRegistry returns a private registry with the process and Go runtime collectors registered.
// The sidecar serves it on /metrics; it never uses the global default registry.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	return reg
}

// New builds the metrics and registers them on reg (normally NewRegistry()). A nil reg builds
// working but unregistered collectors. Registering twice on one registry panics.
func New(reg prometheus.Registerer) *Metrics {
	m := newRequestMetrics()
	m.addReplicationMetrics()
	m.addSideEffectMetrics()
	m.addRunnerMetrics()
	m.addRescuerMetrics()
	m.addExpiryMetrics()
	m.addRetentionMetrics()
	m.satellites = newSatelliteGauges()
	if reg != nil {
		reg.MustRegister(m.collectors()...)
	}
	return m
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.requests, m.queueWait, m.runDuration, m.pending, m.running,
		m.lagBytes, m.lagSeconds, m.confirmedLSN, m.retainedWAL, m.slotRecreations,
		m.leader, m.reconnects,
		m.sideEffects, m.lockWait, m.objectDeletes,
		m.runnerJobs, m.runnerDuration, m.runnerPhases, m.spillStops, m.runnerCrashes, m.limitsHit,
		m.rescued, m.oldestUnfinished, m.forkExpirations, m.requestsPruned,
		m.satellites.open, m.satellites.inUse,
	}
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: name, Help: help, Buckets: buckets,
	})
}
