package app

import (
	"log/slog"
	"net"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/job"
)

// Config is everything the sidecar is configured with. Zero values take the defaults the flags
// document (see sidecar/cmd/dataenv).
type Config struct {
	DSN           string        // control database (the role that ran install)
	HTTPAddr      string        // /metrics, /healthz, /readyz; default 127.0.0.1:9750; "-" disables
	HTTPListener  net.Listener  // already bound (dataenv dev binds before it says it runs)
	Concurrency   int           // parallel handlers, default 8
	ShutdownGrace time.Duration // SIGTERM: time for running handlers to finish, default 30s
	Logger        *slog.Logger

	// RescueInterval and RescueAfter tune the leader's rescuer (sidecar/internal/rescuer):
	// every RescueInterval (default 2s) it re-dispatches unfinished requests older than
	// RescueAfter (default 2s) that no worker holds.
	RescueInterval time.Duration
	RescueAfter    time.Duration
	// ForkExpiryInterval is the period of the leader's sweep that files drop_fork requests for
	// expired forks (sidecar/internal/expiry), default 30s.
	ForkExpiryInterval time.Duration
	// RetryWindow is how long a request hitting transient faults is retried, default 30m.
	RetryWindow time.Duration

	// JobIsolation of DuckDB jobs: jailed, unshare or plain; "" picks jailed when bubblewrap is
	// installed, else plain.
	JobIsolation client.Isolation
	// RunnerPath is the dataenv-runner binary; "" looks next to the dataenv binary.
	RunnerPath string
	// RequestRetention keeps finished requests this long (default 7 days; negative: forever).
	RequestRetention time.Duration
	// JobLimits are the installation's default job limits; zero fields take job.DefaultLimits.
	JobLimits job.Limits
	// JobConcurrency is how many DuckDB jobs run at once (default 4), on workers of their own:
	// control-plane requests never wait behind jobs. JobsPerUser and JobsPerWorkspace cap one
	// user's and one workspace's share (default JobConcurrency - 1).
	JobConcurrency, JobsPerUser, JobsPerWorkspace int
	// JobWarmSpares is how many warm spare runners are kept per isolation mode (0: none).
	JobWarmSpares int
	// JobWarmSpareMountSets is how many sets of local lake directories keep spares of their own
	// for jailed jobs (client.Config.MountedSpareSets); 0 disables.
	JobWarmSpareMountSets int
	// JobCgroup is the memory cgroup runners get a cgroup of their own under: a directory,
	// "auto" or "" (the sidecar's own memory cgroup when a child can be made there), or "off".
	JobCgroup string
	// PGToolsDirs are directories searched first for pg_dump, pg_restore and psql (then every
	// /usr/lib/postgresql/N/bin and PATH); each cluster's copies use tools at least as new as
	// its server (sidecar/internal/pgtool).
	PGToolsDirs []string
	// SatelliteConnections bounds the connections to satellite databases, all satellites
	// together (default 4; sidecar/internal/satellite).
	SatelliteConnections int
	// SatelliteIdleTimeout closes a connection to a satellite left unused this long (default 10 s).
	SatelliteIdleTimeout time.Duration
}
