package job

import (
	"time"

	"github.com/dataenv/dataenv/runner/protocol"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
)

// Phases is where a run job's time in its runner went, as its result shows it: a job slower
// than expected says whether the attaches or its own SQL took the time.
type Phases struct {
	// Settings: the job's limits and arguments made DuckDB settings.
	Settings string `json:"settings"`
	// Attach: dataenv's attaches of the job's lakes and datatables, with their secrets.
	Attach string `json:"attach"`
	// Probe: the list of the lake's tables read before the job's SQL.
	Probe string `json:"probe"`
	// Sandbox: DuckDB closed to everything the job was not given.
	Sandbox string `json:"sandbox"`
	// SQL: the job's own SQL, its rows collected.
	SQL string `json:"sql"`
}

// phase is one part of a job in the runner, under the name its metric label and result field have.
type phase struct {
	name string
	d    time.Duration
}

// phasesOf lists p under dataenv's names, in the order they ran.
func phasesOf(p protocol.Phases) []phase {
	return []phase{{metrics.PhaseSettings, p.Settings}, {metrics.PhaseAttach, p.Setup}, {metrics.PhaseProbe, p.Probes},
		{metrics.PhaseSandbox, p.Sandbox}, {metrics.PhaseSQL, p.Blocks}}
}

// resultPhases is p for a job's result, each rounded to a tenth of a millisecond.
func resultPhases(p protocol.Phases) *Phases {
	s := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	return &Phases{Settings: s(p.Settings), Attach: s(p.Setup), Probe: s(p.Probes), Sandbox: s(p.Sandbox), SQL: s(p.Blocks)}
}

// observePhases records a finished job's phases in the metrics.
func (h *Handlers) observePhases(p protocol.Phases) {
	for _, ph := range phasesOf(p) {
		h.cfg.Metrics.RunnerPhase(ph.name, ph.d)
	}
}
