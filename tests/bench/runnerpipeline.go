package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dataenv/dataenv/runner/bench"
)

// pipelineJob is the bench job through the whole request pipeline: dataenv.run inserted, decoded,
// claimed, the job run on a runner (a warm spare where one is kept), the outcome written and seen
// by dataenv.wait. The work is the overhead job's: ATTACH a DuckLake catalog, count a table of
// 1000 rows (pipelineTable, made first).
const (
	pipelineTable = "ATTACH 'ducklake://main' AS dl;\nCREATE TABLE dl.bench AS SELECT range AS id FROM range(1000)"
	pipelineJob   = "ATTACH 'ducklake://main' AS dl;\nSELECT count(*) FROM dl.bench"
)

// pipelinePause is the time between two jobs of the "paced" rows: what a person running one
// job after another leaves, and enough for the pool's replacement spare to be warm.
const pipelinePause = 1500 * time.Millisecond

// PipelineRow is one way of running jobs through the pipeline.
type PipelineRow struct {
	Isolation string
	// Paced: pipelinePause between jobs (else back to back).
	Paced  bool
	Note   string
	Median time.Duration
	P90    time.Duration
	// Baseline is the median of the warm in-process job timed just before each job (the same
	// load), and Overhead the median of each job's time minus its baseline's.
	Baseline, Overhead time.Duration
	// Claim (insert to the handler's start), Run (the handler: resolve, job, result) and
	// Outcome (the outcome UPDATE to the client seeing it): medians.
	Claim, Run, Outcome time.Duration
	// Phases are the medians of the jobs' phases in the runner, as their results report them
	// (settings, attach, probe, sandbox, sql).
	Phases map[string]time.Duration
}

// pipelinePhases are the phases of a job's result the pipeline table shows, in their order.
var pipelinePhases = []string{"settings", "attach", "probe", "sandbox", "sql"}

// PipelineReport is the pipeline rows and the ping round trip through the same sidecars.
type PipelineReport struct {
	Rows []PipelineRow
	Ping time.Duration
}

// pipelineSidecar starts a sidecar whose jobs run in isolation with the default pool of warm
// spares, on a workspace "bench" with one DuckLake lake on a local directory.
func pipelineSidecar(ctx context.Context, env *Env, bin, isolation string) (*benchSidecar, func(), error) {
	s, err := installedControl(ctx, env, "bench_runner_pipeline_"+isolation, "DATAENV_RUNNER_PATH="+bin,
		"DATAENV_JOB_ISOLATION="+isolation)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "dataenv-bench-pipeline-")
	if err != nil {
		s.close()
		return nil, nil, err
	}
	done := func() { s.close(); os.RemoveAll(dir) }
	if _, err := env.CreateDatabase(ctx, "bench_runner_pipeline_catalog_"+isolation); err != nil {
		done()
		return nil, nil, err
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`SELECT dataenv.add_storage('local', $1)`, []any{"file://" + dir}},
		// DuckLake attaches need the workspace role, which mirrors the instance's application role.
		{`SELECT dataenv.setup_cluster('instance')`, nil},
		{`SELECT dataenv.create_workspace('bench')`, nil},
		{`SELECT dataenv.add_lake('bench', 'main', 'instance', $1, 'local', 'lakes/bench')`, []any{"bench_runner_pipeline_catalog_" + isolation}},
	} {
		if _, err := s.pool.Exec(ctx, q.sql, q.args...); err != nil {
			done()
			return nil, nil, fmt.Errorf("%s: %w", q.sql, err)
		}
	}
	if _, err := s.handle(ctx, "run", map[string]any{"workspace": "bench", "sql": pipelineTable}); err != nil {
		done()
		return nil, nil, err
	}
	return s, done, nil
}

// pipelineJobs measures, for one isolation mode, n jobs paced and n back to back (after two to
// warm up, which also give a jailed job's set of lake directories its spares), each job waited
// for before the next, and n pings.
func pipelineJobs(ctx context.Context, env *Env, warm *bench.Warm, bin, isolation string, n int) ([]PipelineRow, []time.Duration, error) {
	s, done, err := pipelineSidecar(ctx, env, bin, isolation)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var rows []PipelineRow
	for _, paced := range []bool{true, false} {
		row, err := s.timeJobs(ctx, warm, isolation, paced, n)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
	}
	var pings []time.Duration
	for i := 0; i < 4*n; i++ {
		start := time.Now()
		if _, err := s.handle(ctx, "ping", map[string]any{}); err != nil {
			return nil, nil, err
		}
		pings = append(pings, time.Since(start))
	}
	return rows, pings, nil
}

// timeJobs runs n+2 jobs and times the last n, each just after a warm in-process job.
func (s *benchSidecar) timeJobs(ctx context.Context, warm *bench.Warm, isolation string, paced bool, n int) (PipelineRow, error) {
	row := PipelineRow{Isolation: isolation, Paced: paced}
	var times, bases, overs, claims, runs, outcomes []time.Duration
	phases := map[string][]time.Duration{}
	spares := 0
	for i := 0; i < n+2; i++ {
		if paced {
			time.Sleep(pipelinePause)
		}
		base, err := warm.Time(ctx)
		if err != nil {
			return row, fmt.Errorf("warm in-process job: %w", err)
		}
		start := time.Now()
		res, id, err := s.handleID(ctx, "run", map[string]any{"workspace": "bench", "sql": pipelineJob})
		if err != nil {
			return row, err
		}
		took := time.Since(start)
		if i < 2 {
			continue
		}
		var claim, run time.Duration
		if err := s.pool.QueryRow(ctx, `SELECT started_at - created_at, finished_at - started_at FROM dataenv.requests WHERE id = $1`,
			id).Scan(&claim, &run); err != nil {
			return row, err
		}
		times, claims, runs, outcomes = append(times, took), append(claims, claim), append(runs, run), append(outcomes, took-claim-run)
		bases, overs = append(bases, base), append(overs, took-base)
		var out struct {
			Warm   bool              `json:"warm"`
			Phases map[string]string `json:"phases"`
		}
		if err := json.Unmarshal(res, &out); err != nil {
			return row, fmt.Errorf("the job's result: %w", err)
		}
		if out.Warm {
			spares++
		}
		for _, p := range pipelinePhases {
			d, err := time.ParseDuration(out.Phases[p])
			if err != nil {
				return row, fmt.Errorf("the job's phase %s: %w", p, err)
			}
			phases[p] = append(phases[p], d)
		}
	}
	row.Median, row.P90 = percentile(times, 50), percentile(times, 90)
	row.Claim, row.Run, row.Outcome = percentile(claims, 50), percentile(runs, 50), percentile(outcomes, 50)
	row.Baseline, row.Overhead = percentile(bases, 50), percentile(overs, 50)
	row.Note = fmt.Sprintf("%d of %d jobs on a warm spare", spares, n)
	row.Phases = map[string]time.Duration{}
	for p, ds := range phases {
		row.Phases[p] = percentile(ds, 50)
	}
	return row, nil
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}

// renderRunnerPipeline is the table of jobs through the pipeline against the warm in-process
// job timed just before each, with the overhead and what is left of it past a ping's round trip.
func renderRunnerPipeline(r PipelineReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe same job through the whole request pipeline (`dataenv.run` inserted → outcome seen by `dataenv.wait`), "+
		"a real sidecar with its default pool of warm spares, one job at a time: paced (%s between jobs, as a person runs them one "+
		"after another: the spare that replaces a taken one is warm by the next job) and back to back (the next job is inserted as soon "+
		"as the last one's outcome is seen). Each job is paired with the warm in-process job (the table's third row) run just before it, "+
		"so that both see the same load: baseline is the median of those, overhead the median of each pair's difference. "+
		"A `ping` through the same sidecars (insert, decode, dispatch, outcome written and seen; no job) took %s ms (median). "+
		"Claim: insert to the handler's start; run: the handler (resolve, job on the runner, result); outcome: the outcome's commit "+
		"until the client sees it (medians).\n\n", pipelinePause, ms(r.Ping))
	b.WriteString("| jobs run | median | p90 | baseline | median / baseline | overhead | overhead minus ping | claim / run / outcome | runners |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		how := "back to back"
		if row.Paced {
			how = "paced"
		}
		fmt.Fprintf(&b, "| %s, %s | %s ms | %s ms | %s ms | %.2f× | %s ms | %s ms | %s / %s / %s ms | %s |\n", row.Isolation, how,
			ms(row.Median), ms(row.P90), ms(row.Baseline), float64(row.Median)/float64(row.Baseline), ms(row.Overhead),
			ms(row.Overhead-r.Ping), ms(row.Claim), ms(row.Run), ms(row.Outcome), row.Note)
	}
	b.WriteString("\nWhere the handler's time (run) went, from the phases each job's result reports (medians; the rest is the " +
		"resolve before the runner gets the job, the request and the result between the processes, and the lake's table records " +
		"written after it):\n\n| jobs run | run | " + strings.Join(pipelinePhases, " | ") + " | the rest |\n|" +
		strings.Repeat(" --- |", len(pipelinePhases)+3) + "\n")
	for _, row := range r.Rows {
		how := "back to back"
		if row.Paced {
			how = "paced"
		}
		fmt.Fprintf(&b, "| %s, %s | %s ms |", row.Isolation, how, ms(row.Run))
		rest := row.Run
		for _, p := range pipelinePhases {
			fmt.Fprintf(&b, " %s ms |", ms(row.Phases[p]))
			rest -= row.Phases[p]
		}
		fmt.Fprintf(&b, " %s ms |\n", ms(rest))
	}
	return b.String()
}
