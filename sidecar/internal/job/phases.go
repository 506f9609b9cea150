package job

import (
	"time"

	"github.com/dataenv/dataenv/runner/protocol"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
)

// phase is one part of a job in the runner, under the name its metric label and result field have.
type phase struct {
	name string
	d    time.Duration
}

// phasesOf lists p under dataenv's names (metrics.RunnerPhaseLabels), in the order they ran.
func phasesOf(p protocol.Phases) []phase {
	return []phase{{metrics.PhaseSettings, p.Settings}, {metrics.PhaseAttach, p.Setup}, {metrics.PhaseProbe, p.Probes},
		{metrics.PhaseSandbox, p.Sandbox}, {metrics.PhaseSQL, p.Blocks}}
}

// resultPhases is p for a job's result, each rounded to a tenth of a millisecond: a job slower
// than expected says whether the attaches or its own SQL took the time. (A result is jsonb,
// which keeps no key order: a map loses nothing.)
func resultPhases(p protocol.Phases) map[string]string {
	out := map[string]string{}
	for _, ph := range phasesOf(p) {
		out[ph.name] = ph.d.Round(100 * time.Microsecond).String()
	}
	return out
}

// observePhases records a finished job's phases in the metrics.
func (h *Handlers) observePhases(p protocol.Phases) {
	for _, ph := range phasesOf(p) {
		h.cfg.Metrics.RunnerPhase(ph.name, ph.d)
	}
}
