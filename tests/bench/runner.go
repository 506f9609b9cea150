package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dataenv/dataenv/runner/bench"
	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/tests/testenv"
)

// The runner suite (issue 6): what a DuckDB job in a process of its own costs per job (spawn,
// open, load extensions, attach a DuckLake catalog in Postgres, trivial query) against the same
// work in-process, and with a warm spare runner started ahead of the job. Measured jailed
// (bubblewrap), as jobs run in production.

func init() { Register(runnerSuite{}) }

type runnerSuite struct{}

func (runnerSuite) Name() string { return "runner" }

func (runnerSuite) Run(ctx context.Context, env *Env) (string, error) {
	start := time.Now()
	bin, remove, err := testenv.BuildRunnerBinary(ctx)
	if err != nil {
		return "", fmt.Errorf("build the runner: %w", err)
	}
	defer remove()
	dsn, err := env.CreateDatabase(ctx, "bench_runner")
	if err != nil {
		return "", err
	}
	iterations := 20
	if env.Quick {
		iterations = 5
	}
	env.Progress("runner: %d jobs per variant (in-process, spawned, warm in-process, warm spare)", iterations)
	rep, err := bench.Overhead(ctx, bench.Config{
		Client:     client.Config{RunnerPath: bin, Isolation: client.IsolationJailed},
		Isolation:  client.IsolationJailed,
		CatalogDSN: dsn, Iterations: iterations,
	})
	if err != nil {
		return "", err
	}
	warm, err := bench.NewWarm(ctx, bench.Config{Client: client.Config{RunnerPath: bin}, CatalogDSN: dsn,
		MetadataSchema: "dataenv_bench_paired"})
	if err != nil {
		return "", fmt.Errorf("the paired warm in-process job: %w", err)
	}
	defer warm.Close()
	var pr PipelineReport
	var pings []time.Duration
	for _, iso := range []string{"plain", "jailed"} {
		env.Progress("runner: %d jobs paced and %d back to back through the request pipeline, isolation %s", iterations, iterations, iso)
		rows, ps, err := pipelineJobs(ctx, env, warm, bin, iso, iterations)
		if err != nil {
			return "", fmt.Errorf("jobs through the pipeline (%s): %w", iso, err)
		}
		pr.Rows, pings = append(pr.Rows, rows...), append(pings, ps...)
	}
	pr.Ping = percentile(pings, 50)
	return fmt.Sprintf("## DuckDB job overhead (suite `runner`)\n\nMeasured on %s; the suite took %s.\n\n%s\n%s\n%s",
		env.Machine(), time.Since(start).Round(time.Second), rep.String(), renderRunnerPipeline(pr),
		runnerReading), nil
}

// runnerReading is the section's closing text.
const runnerReading = `
Reading: a spawned runner costs what opening DuckDB and loading the extensions costs anyway, plus the spawn and the jail; a warm spare (a runner started, DuckDB open and extensions loaded, before the job arrives) takes most of that off the job's path.
`
