package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// runnerBuckets: 10 ms (a spawned runner costs ~50 ms before extensions load) to ~1.5 h.
var runnerBuckets = prometheus.ExponentialBuckets(0.01, 4, 10)

// phaseBuckets: 0.5 ms (a sandbox, a probe) to ~9 min.
var phaseBuckets = prometheus.ExponentialBuckets(0.0005, 4, 11)

// Runner job outcomes, the values of the outcome label of dataenv_runner_jobs_total.
const (
	RunnerSucceeded = "succeeded"
	RunnerFailed    = "failed"
	RunnerCancelled = "cancelled"
	RunnerCrashed   = "crashed"
)

func (m *Metrics) addRunnerMetrics() {
	m.runnerJobs = counterVec("runner_jobs_total",
		"DuckDB runner jobs finished, by outcome (succeeded, failed, cancelled, crashed).", "outcome")
	m.runnerDuration = histogram("runner_job_duration_seconds",
		"Wall time of a runner job, from spawn to exit.", runnerBuckets)
	m.runnerPhases = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace,
		Name:    "runner_job_phase_seconds",
		Help:    "Time a runner job spent in each phase (settings, attach, probe, sandbox, sql), spare warm-up not included.",
		Buckets: phaseBuckets}, []string{"phase"})
	m.spillStops = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace,
		Name: "runner_spill_stops_total",
		Help: "Runner jobs stopped because their temporary spill reached its limit."})
	m.limitsHit = counterVec("job_limits_hit_total",
		"DuckDB jobs stopped at one of their limits, by limit (timeout, memory, disk).", "limit")
	m.runnerCrashes = counterVec("runner_crashes_total",
		"Runner processes that died abnormally, by signal (e.g. SIGKILL for the OOM killer, none).",
		"signal")
}

// RunnerJobFinished counts a finished runner job and observes its duration.
func (m *Metrics) RunnerJobFinished(outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.runnerJobs.WithLabelValues(outcome).Inc()
	m.runnerDuration.Observe(d.Seconds())
}

// RunnerPhaseLabels are the values of the phase label of dataenv_runner_job_phase_seconds, in
// the order a job runs them.
var RunnerPhaseLabels = []string{PhaseSettings, PhaseAttach, PhaseProbe, PhaseSandbox, PhaseSQL}

// Runner job phases (see runner/protocol.Phases): the job's limits made settings, dataenv's
// attaches, the lake's table list, the sandbox, the job's own SQL.
const (
	PhaseSettings = "settings"
	PhaseAttach   = "attach"
	PhaseProbe    = "probe"
	PhaseSandbox  = "sandbox"
	PhaseSQL      = "sql"
)

// RunnerPhase observes the time a finished runner job spent in one phase.
func (m *Metrics) RunnerPhase(phase string, d time.Duration) {
	if m == nil {
		return
	}
	m.runnerPhases.WithLabelValues(phase).Observe(d.Seconds())
}

// RunnerSpillStop counts a job stopped at its spill limit.
func (m *Metrics) RunnerSpillStop() {
	if m == nil {
		return
	}
	m.spillStops.Inc()
}

// RunnerCrash counts a runner process that died abnormally, by signal name ("SIGKILL", or "none"
// for a non-zero exit without a signal).
func (m *Metrics) RunnerCrash(signal string) {
	if m == nil {
		return
	}
	m.runnerCrashes.WithLabelValues(signal).Inc()
}

// JobLimitLabels are the values of the limit label of dataenv_job_limits_hit_total.
var JobLimitLabels = []string{"timeout", "memory", "disk"}

// JobLimitHit counts a job stopped at its limit ("timeout", "memory" or "disk").
func (m *Metrics) JobLimitHit(limit string) {
	if m == nil {
		return
	}
	m.limitsHit.WithLabelValues(limit).Inc()
}
