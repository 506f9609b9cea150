package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// pipelineJob is the bench job through the whole request pipeline: dataenv.run inserted, decoded,
// claimed, the job run on a runner (a warm spare where one is kept), the outcome written and seen
// by dataenv.wait. The SQL is the overhead job's: ATTACH a DuckLake catalog, a trivial query.
const pipelineJob = "ATTACH 'ducklake://main' AS dl;\nSELECT count(*) FROM duckdb_tables()"

// PipelineRow is one isolation mode of jobs through the pipeline.
type PipelineRow struct {
	Isolation string
	Note      string
	Median    time.Duration
	P90       time.Duration
}

// pipelineJobs measures n jobs (after two to warm up) through a sidecar whose jobs run in
// isolation with the default pool of warm spares, each job waited for before the next.
func pipelineJobs(ctx context.Context, env *Env, bin, isolation string, n int) (PipelineRow, error) {
	row := PipelineRow{Isolation: isolation}
	s, err := installedControl(ctx, env, "bench_runner_pipeline_"+isolation, "DATAENV_RUNNER_PATH="+bin,
		"DATAENV_JOB_ISOLATION="+isolation)
	if err != nil {
		return row, err
	}
	defer s.close()
	dir, err := os.MkdirTemp("", "dataenv-bench-pipeline-")
	if err != nil {
		return row, err
	}
	defer os.RemoveAll(dir)
	if _, err := env.CreateDatabase(ctx, "bench_runner_pipeline_catalog_"+isolation); err != nil {
		return row, err
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
			return row, fmt.Errorf("%s: %w", q.sql, err)
		}
	}
	var times []time.Duration
	var warm int
	for i := 0; i < n+2; i++ {
		start := time.Now()
		res, err := s.handle(ctx, "run", map[string]any{"workspace": "bench", "sql": pipelineJob})
		if err != nil {
			return row, err
		}
		if i >= 2 {
			times = append(times, time.Since(start))
			var out struct {
				Warm bool `json:"warm"`
			}
			if json.Unmarshal(res, &out) == nil && out.Warm {
				warm++
			}
		}
	}
	slices.Sort(times)
	row.Median, row.P90 = times[len(times)/2], times[len(times)*9/10]
	row.Note = fmt.Sprintf("%d of %d jobs on a warm spare", warm, n)
	return row, nil
}

// renderPipeline is the table of jobs through the pipeline against the warm in-process baseline.
func renderRunnerPipeline(rows []PipelineRow, baseline time.Duration) string {
	var b strings.Builder
	b.WriteString("\nThe same job through the whole request pipeline (`dataenv.run` inserted → outcome seen by `dataenv.wait`), " +
		"a real sidecar with its default pool of warm spares, one job at a time:\n\n")
	b.WriteString("| jobs run | median | p90 | vs warm in-process | runners |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s ms | %s ms | %.2f× | %s |\n", r.Isolation, ms(r.Median), ms(r.P90),
			float64(r.Median)/float64(baseline), r.Note)
	}
	return b.String()
}
