package main

import (
	"context"
	"fmt"
	"os"
	"strings"
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
	start, loadStart := time.Now(), loadAverage()
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
	overhead := ""
	if !env.RunnerPipelineOnly {
		env.Progress("runner: %d jobs per variant (in-process, spawned, warm in-process, warm spare)", iterations)
		rep, err := bench.Overhead(ctx, bench.Config{
			Client:     client.Config{RunnerPath: bin, Isolation: client.IsolationJailed},
			Isolation:  client.IsolationJailed,
			CatalogDSN: dsn, Iterations: iterations,
		})
		if err != nil {
			return "", err
		}
		overhead = rep.String()
	}
	warm, err := bench.NewWarm(ctx, bench.Config{Client: client.Config{RunnerPath: bin}, CatalogDSN: dsn,
		MetadataSchema: "dataenv_bench_paired"})
	if err != nil {
		return "", fmt.Errorf("the paired warm in-process job: %w", err)
	}
	defer warm.Close()
	var pr PipelineReport
	var pings []time.Duration
	// Twice as many jobs through the pipeline: its ratio's target is a few milliseconds wide, and
	// a median of 20 paired jobs moved by about that between runs.
	jobs := 2 * iterations
	for _, iso := range []string{"plain", "jailed"} {
		env.Progress("runner: %d jobs paced and %d back to back through the request pipeline, isolation %s", jobs, jobs, iso)
		rows, ps, err := pipelineJobs(ctx, env, warm, bin, iso, jobs)
		if err != nil {
			return "", fmt.Errorf("jobs through the pipeline (%s): %w", iso, err)
		}
		pr.Rows, pings = append(pr.Rows, rows...), append(pings, ps...)
	}
	pr.Ping = percentile(pings, 50)
	return fmt.Sprintf("## DuckDB job overhead (suite `runner`)\n\nMeasured on %s; the suite took %s; load average "+
		"(1 min, from /proc/loadavg: it counts this suite's own threads, the extension loads of runners warming up among them: docs/operations.md) %s at the start, %s at the end.\n\n%s\n%s\n%s",
		env.Machine(), time.Since(start).Round(time.Second), loadStart, loadAverage(), overhead, renderRunnerPipeline(pr),
		runnerReading), nil
}

// loadAverage is the 1-minute load average ("?" when it cannot be read).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// runnerReading is the section's closing text.
const runnerReading = `
Reading: a spawned runner costs what opening DuckDB and loading the extensions costs anyway, plus the spawn and the jail; a warm spare (a runner started, DuckDB open and extensions loaded, before the job arrives) takes most of that off the job's path. A job on a local lake has the lake's data path watched for its disk limit (the files it writes there count); the watched row is the warm spare's job with that path holding 50,000 more files, as a lake written in small batches does: the watchdog reads the free space of the path's file system at every poll and walks the path only once that could take the job past its limit (until 2026-12-02 it walked the whole path before every job and at every poll: 283 ms against 61 ms unwatched in a trial run, 4.6×).

Through the pipeline (issue 16's target: within 1.2× of the warm in-process job), the job's own work is the same (the ATTACH of the DuckLake catalog and the count), but for one thing a job saves: its attach logs in to the catalog with the SCRAM keys of the workspace role's verifier, which the sidecar computed once, where the baseline's libpq derives them from the password at every connection (4,096 rounds, about 6 ms of CPU here; see docs/least-privilege.md). What a job adds, in order:

- **Claim and outcome** (the claim / run / outcome column): the request's insert (its validation and authorization triggers: plpgsql helpers whose plans last the session, about a millisecond for a run), the request decoded from replication, claimed (an UPDATE committed, fsync on; the requester's authorization is checked beside it, on another connection), and at the end the outcome committed and dataenv.wait woken (it waits on the request's gate lock, not on a timer). A ping pays most of the same, which is why the overhead is also shown minus a ping.
- **Resolve**, in the handler before the runner gets the job: the workspace with its fork chain, their lakes and those lakes' storages read in one round trip (three statements in one batch); then, under one hold of the catalog cluster's lifecycle lock (the cluster's configuration read in the try-lock's round trip, the sidecar instances for the fence's leader check in the workspace role's), the workspace role converged once (the workspace and its role's record read in one query) for its libpq settings and its access to the lake's metadata schema (granted once, then remembered for a minute), and the catalog database checked bindable (never a template, never a database holding a dataenv installation: on an admin connection of its own, then remembered for a minute). The job limits are read meanwhile, and the resolve step is written with the outcome (in the outcome's commit, when the job ends within half a second; a write of its own would run beside the job). A first attempt with no former leader to fence opens no connection just to fence.
- **The job's setup in the runner**: its limits as DuckDB settings (set by the spare ahead of the job when they are the installation's defaults, as here), the temporary Postgres secret, the attach as the workspace's role (its own session, named after the request's attempt so that a later attempt can end it), the secret dropped, the list of the lake's tables read on that same session (a probe, before the job's own SQL: the tables written outside dataenv are recorded from it once the job is done, where a connection of the sidecar's own used to read them beside the job), then the sandbox (allowed directories, no external access, configuration locked: one call to DuckDB of four statements; the spare set the part that is the same for every job ahead).
- **The process**: the request written to the runner's stdin; its result file read as soon as the runner says it is written (the runner then exits at nice 19, which takes the kernel several milliseconds it then takes from nobody, and its work directory and cgroup are removed once it has). A spare has run a small DuckLake job of its own before it counts as ready: a process's first job costs it more CPU than the same job later.

The second table splits the handler's time with the phases each job's result reports (the same figures as the sidecar's dataenv_runner_job_phase_seconds): attach and sql are the job's own work, which the in-process baseline does too (its ATTACH and its count); settings, probe and sandbox are what the runner adds inside the process, and "the rest" is the resolve, the request and result passed between the processes, and the table records written after the job.

Tried for the probe and not kept (measured through this pipeline, plain paced, against the same code without the change): running it on a second DuckDB connection beside the job's SQL took it off the path (about 4 ms), but the job's SQL then opened a catalog session of its own for the lake, and its statements took about 10 ms longer; listing the tables from DuckDB's own catalog (duckdb_tables()) instead of a query through the attach's session made the probe load DuckLake's catalog (about 37 ms, where the job's SQL then saved about 20 ms). The probe stays one query through the attach's session, before the job's SQL.

None of these is a wait or a poll. The checks that remain each job (the lifecycle lock, the sandbox) are security and consistency checks that this issue keeps. A taken spare is replaced once its job is done while the pool (2 spares, the sidecar's default, in every row here) holds another, so that no runner warms up beside a job; back to back, the replacement warms up beside the next job, and that job's paired in-process baseline, run just before it, shares the CPU with it too. Jailed jobs on a local lake run on spares kept for their set of lake directories, from the set's second job (see docs/operations.md).
`
