package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/app"
	"github.com/dataenv/dataenv/sidecar/internal/job"
)

func runSidecar(ctx context.Context, args []string, _ io.Writer) error {
	fs := newFlags("sidecar", "Runs the dataenv sidecar: one leader performs requests, other instances wait as hot standbys.")
	dsn := fs.String("dsn", "", "control database connection string (the role that ran install)")
	sc := sidecarFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireDSN(*dsn); err != nil {
		return err
	}
	cfg, err := sc.config()
	if err != nil {
		return err
	}
	cfg.DSN = *dsn
	return app.Run(ctx, cfg)
}

// sidecarOptions are the flags every command that runs a sidecar shares (sidecar, dev).
type sidecarOptions struct {
	httpAddr, grace, logLevel, isolation, runnerPath, pgToolsDirs *string
	rescueInterval, rescueAfter, retryWindow, forkExpiryInterval  *string
	satelliteIdle                                                 *string
	concurrency                                                   *int
	jobTimeout, jobMemory, jobDisk, jobCgroup, retention          *string
	jobThreads, jobSpares, jobConc, jobsPerUser, jobsPerWS        *int
	satelliteConns, jobSpareSets                                  *int
}

func sidecarFlags(fs flagSet) sidecarOptions {
	return sidecarOptions{
		httpAddr:    fs.String("http-addr", "127.0.0.1:9750", "listen address of /metrics, /healthz and /readyz (\"-\" disables)"),
		concurrency: fs.Int("concurrency", 8, "requests run in parallel"),
		grace:       fs.String("shutdown-grace", "30s", "on SIGTERM, how long running requests may take to finish"),
		logLevel:    fs.String("log-level", "info", "debug, info, warn or error"),
		isolation:   fs.String("job-isolation", "", "isolation of DuckDB jobs: jailed, unshare or plain (default: jailed when bubblewrap is installed)"),
		runnerPath:  fs.String("runner-path", "", "the dataenv-runner binary (default: next to dataenv)"),
		rescueInterval: fs.String("rescue-interval", "2s",
			"period of the leader's sweep that re-dispatches unfinished requests no worker holds"),
		rescueAfter: fs.String("rescue-after", "2s",
			"age (pending: since creation; running: since the last update) past which the sweep re-dispatches a request no worker holds"),
		forkExpiryInterval: fs.String("fork-expiry-interval", "30s",
			"period of the leader's sweep that files drop_fork requests for expired forks (create_fork's expires_in, dataenv.set_fork_expiry)"),
		retryWindow: fs.String("retry-window", "30m",
			"how long a request hitting transient faults (lost connections, restarts, lock timeouts) is retried before it fails"),
		pgToolsDirs: fs.String("pg-tools-dirs", "", "directories (':'-separated) searched first for pg_dump, pg_restore and psql; "+
			"each cluster's copies use tools at least as new as its server (then /usr/lib/postgresql/*/bin and PATH are searched)"),
		retention: fs.String("request-retention", "168h", "how long finished requests are kept before the leader "+
			"prunes them, in small batches (0 keeps them forever)"),
		jobTimeout: fs.String("job-timeout", job.DefaultTimeout.String(), "default wall-clock limit of a DuckDB job "+
			"(dataenv.set_job_limits overrides it per workspace; a request may ask for less)"),
		jobMemory: fs.String("job-memory", "2GB", "default memory limit of a DuckDB job: DuckDB's memory_limit, and the "+
			"runner's own memory cgroup (half as much again) where --job-cgroup finds one"),
		jobThreads: fs.Int("job-threads", job.DefaultThreads, "default number of DuckDB threads of a job"),
		jobDisk: fs.String("job-disk", "10GB", "default disk limit of a DuckDB job: spill and scratch space plus bytes "+
			"written into the workspace's local lake paths"),
		satelliteConns: fs.Int("satellite-connections", 4, "connections to satellite databases, all satellites together "+
			"(opened when an envelope needs one, closed when idle); envelopes other than jobs run on twice as many workers of their own"),
		satelliteIdle: fs.String("satellite-idle-timeout", "10s", "how long a connection to a satellite database stays open unused "+
			"(longer keeps busy satellites on warm connections, shorter frees server backends sooner)"),
		jobSpares: fs.Int("job-warm-spares", client.DefaultWarmSpares, "warm spare DuckDB runners kept per isolation mode (started, DuckDB open, "+
			"extensions loaded; each runs one job, refilled in the background); 0 disables"),
		jobSpareSets: fs.Int("job-warm-spare-mount-sets", client.DefaultMountedSpareSets, "jailed jobs on local (file://) lakes: "+
			"how many sets of lake directories keep --job-warm-spares spares of their own (a jail's mounts are fixed when it starts; "+
			"a set earns spares at its second job, the least recently used lose theirs); 0 disables"),
		jobConc: fs.Int("job-concurrency", 4, "DuckDB jobs run at once, on workers of their own "+
			"(control-plane requests, --concurrency of them, never wait behind jobs)"),
		jobsPerUser: fs.Int("job-concurrency-per-user", 0, "DuckDB jobs one user runs at once; the rest wait in the queue, "+
			"their position in their steps (default: --job-concurrency minus 1, so a slot stays for others)"),
		jobsPerWS: fs.Int("job-concurrency-per-workspace", 0, "DuckDB jobs one workspace runs at once (default: --job-concurrency minus 1)"),
		jobCgroup: fs.String("job-cgroup", "auto", "memory cgroup under which each runner gets a cgroup of its own: "+
			"a directory (v1 memory controller or v2), auto (the sidecar's own memory cgroup when a child can be made there), or off"),
	}
}

func (o sidecarOptions) config() (app.Config, error) {
	var d [6]time.Duration
	for i, f := range []struct{ name, v string }{{"shutdown-grace", *o.grace}, {"rescue-interval", *o.rescueInterval},
		{"rescue-after", *o.rescueAfter}, {"retry-window", *o.retryWindow}, {"fork-expiry-interval", *o.forkExpiryInterval},
		{"satellite-idle-timeout", *o.satelliteIdle}} {
		var err error
		if d[i], err = time.ParseDuration(f.v); err != nil || d[i] <= 0 {
			return app.Config{}, fmt.Errorf("--%s: %q is not a positive duration (for example 2s, 30m)", f.name, f.v)
		}
	}
	limits, err := o.jobLimits()
	if err != nil {
		return app.Config{}, err
	}
	keep, err := time.ParseDuration(*o.retention)
	if err != nil || keep < 0 {
		return app.Config{}, fmt.Errorf("--request-retention %q: want a duration such as 168h (0 keeps requests forever)", *o.retention)
	}
	if keep == 0 {
		keep = -1
	}
	if *o.satelliteConns < 1 {
		return app.Config{}, fmt.Errorf("--satellite-connections %d: want at least 1", *o.satelliteConns)
	}
	return app.Config{HTTPAddr: *o.httpAddr, Concurrency: *o.concurrency, ShutdownGrace: d[0],
		RescueInterval: d[1], RescueAfter: d[2], RetryWindow: d[3], ForkExpiryInterval: d[4],
		Logger: newLogger(*o.logLevel), JobIsolation: client.Isolation(*o.isolation), RunnerPath: *o.runnerPath,
		PGToolsDirs: filepath.SplitList(*o.pgToolsDirs), JobLimits: limits, JobCgroup: *o.jobCgroup, JobWarmSpares: max(*o.jobSpares, 0),
		SatelliteConnections: *o.satelliteConns, SatelliteIdleTimeout: d[5], JobWarmSpareMountSets: max(*o.jobSpareSets, 0),
		JobConcurrency: *o.jobConc, JobsPerUser: *o.jobsPerUser, JobsPerWorkspace: *o.jobsPerWS,
		RequestRetention: keep}, nil
}

// jobLimits reads the --job-* flags.
func (o sidecarOptions) jobLimits() (job.Limits, error) {
	var l job.Limits
	var err error
	if l.Timeout, err = time.ParseDuration(*o.jobTimeout); err != nil || l.Timeout <= 0 {
		return l, fmt.Errorf("--job-timeout %q: want a positive duration such as 30m or 2h", *o.jobTimeout)
	}
	if l.MemoryBytes, err = job.ParseBytes(*o.jobMemory); err != nil {
		return l, fmt.Errorf("--job-memory: %w", err)
	}
	if l.DiskBytes, err = job.ParseBytes(*o.jobDisk); err != nil {
		return l, fmt.Errorf("--job-disk: %w", err)
	}
	if l.Threads = *o.jobThreads; l.Threads < 1 {
		return l, fmt.Errorf("--job-threads %d: want at least 1", l.Threads)
	}
	return l, nil
}
