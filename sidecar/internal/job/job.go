// Package job performs the run and materialize requests: it resolves the job's ATTACH
// statements for its workspace (sidecar/lake), runs the SQL in a dataenv-runner process
// (runner/client), and turns the rows into the request's result: columns and rows as JSON arrays
// in the statement's column order, bounded in size. A materialize job also records what it wrote
// (table, status, snapshot id, row count) in dataenv.materializations, the record the fork
// read-defer decisions are made from.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/protocol"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Request kinds.
const (
	KindRun         = "run"
	KindMaterialize = "materialize"
)

// DefaultMaxResultBytes bounds the rows of a job's result when the request does not: results are
// kept in dataenv.requests (until the retention prunes them), so they stay small; a request may
// ask for up to MaxResultBytesLimit (max_result_bytes), and materialize writes any number of rows.
const DefaultMaxResultBytes = 256 << 10

// MaxResultBytesLimit is the largest max_result_bytes a request may ask for (the SQL validator
// refuses more).
const MaxResultBytesLimit = 16 << 20

// Config configures the job handlers.
type Config struct {
	// Control is the control database pool (required).
	Control *pgxpool.Pool
	// WorkspaceLocks are the sessions workspace locks are held on (required).
	WorkspaceLocks *lock.WorkspaceSessions
	// Resolver resolves ATTACH statements (required).
	Resolver *lake.Resolver
	// Runner configures the runner client, created at the first job (so a sidecar without the
	// runner binary still starts, and jobs fail with the reason).
	Runner client.Config
	// Isolation of every job; "" is auto: jailed when a jail tool is installed, else plain.
	Isolation client.Isolation
	// MaxResultBytes bounds result rows; default DefaultMaxResultBytes.
	MaxResultBytes int64
	// Limits are the installation's default job limits; zero fields take DefaultLimits.
	Limits Limits
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Metrics may be nil.
	Metrics *metrics.Metrics
}

// Handlers performs run and materialize requests.
type Handlers struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	runner *client.Client
	// crashes counts runner crashes per request (crash.go).
	crashes crashCounter
}

// New returns the handlers.
func New(cfg Config) (*Handlers, error) {
	if cfg.Control == nil || cfg.Resolver == nil || cfg.WorkspaceLocks == nil {
		return nil, errors.New("job.New: Control, Resolver and WorkspaceLocks are required")
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handlers{cfg: cfg, log: cfg.Logger.With("component", "job")}, nil
}

// Register registers the run, materialize, promote, repin_fork and maintain_lake kinds.
func (h *Handlers) Register(reg *request.Registry) {
	reg.Register(KindRun, request.HandlerFunc(h.handleRun))
	reg.Register(KindMaterialize, request.HandlerFunc(h.handleMaterialize))
	reg.Register(KindPromote, request.HandlerFunc(h.handlePromote))
	reg.Register(KindRepinFork, request.HandlerFunc(h.handleRepin))
	reg.Register(KindMaintainLake, request.HandlerFunc(h.handleMaintain))
}

// Prewarm fills the pool of warm spare runners for the jobs' isolation (Config.Runner.WarmSpares;
// nothing without), so that the first job does not pay the cold start either. A sidecar without
// the runner binary logs why and goes on: its jobs fail with the reason.
func (h *Handlers) Prewarm(ctx context.Context) {
	if h.cfg.Runner.WarmSpares <= 0 {
		return
	}
	c, err := h.client()
	if err == nil {
		err = c.Prewarm(ctx, h.cfg.Isolation)
	}
	if err != nil && ctx.Err() == nil {
		h.log.Warn("warm spare DuckDB runners", "error", err)
	}
}

// Close stops the spare runners.
func (h *Handlers) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runner != nil {
		h.runner.Close()
	}
}

func (h *Handlers) client() (*client.Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runner != nil {
		return h.runner, nil
	}
	rc := h.cfg.Runner
	if rc.Logger == nil {
		rc.Logger = h.log
	}
	// Spares set the installation's default limits ahead: a job of a workspace without limits
	// of its own then sets none of them.
	var def client.Job
	(&jobLimits{Limits: h.cfg.Limits}).apply(&def, false)
	rc.SpareJob = client.SpareJob{MemoryLimit: def.MemoryLimit, Threads: def.Threads, DiskCap: def.DiskCap}
	c, err := client.New(rc)
	if err != nil {
		return nil, request.Refusef("DuckDB jobs are unavailable: %v", err)
	}
	h.runner = c
	return c, nil
}

// Columns and Rows of a job's result.
type Result struct {
	Columns   []protocol.Column   `json:"columns"`
	Rows      [][]json.RawMessage `json:"rows"`
	RowCount  int                 `json:"row_count"`
	Truncated bool                `json:"truncated,omitempty"`
	// TruncatedNote says, when Truncated, where the rows were cut and how to get all of them.
	TruncatedNote string   `json:"truncated_note,omitempty"`
	Notes         []string `json:"notes,omitempty"`
	Duration      string   `json:"duration"`
	// Warm is true when the job ran on a warm spare runner (started ahead, DuckDB open).
	Warm bool `json:"warm,omitempty"`
	// Phases is where the runner's part of Duration went: settings, attach, probe, sandbox, sql.
	Phases map[string]string `json:"phases,omitempty"`
}

type runArgs struct {
	Workspace      string  `json:"workspace"`
	SQL            string  `json:"sql"`
	MaxResultBytes int64   `json:"max_result_bytes"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
}

func (h *Handlers) handleRun(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args runArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if strings.TrimSpace(args.SQL) == "" || args.Workspace == "" {
		return nil, request.Refusef("run: workspace and sql are required")
	}
	lim, plan, err := h.resolveRun(ctx, args, rep)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	// Held for the outcome's commit: a write of its own would run beside the job.
	request.ReportHeld(ctx, rep, "resolve", "done", strings.Join(plan.Notes, "; "))
	res, err := h.runJob(ctx, plan, lim, []string{plan.SQL}, true, args.MaxResultBytes)
	if err != nil {
		return nil, err
	}
	plan.Record(ctx, res.Probes)
	out := resultOf(res.Results[len(res.Results)-1], plan, res.Duration)
	out.Warm, out.Phases = res.Warm, resultPhases(res.Phases)
	if out.Truncated {
		out.TruncatedNote = truncatedNote(out.RowCount, maxResultBytes(args.MaxResultBytes, h.cfg.MaxResultBytes))
	}
	return scrubbed(plan, out)
}

// resolveRun reads the job's limits while it resolves the job's attaches (lake.ResolveRun).
func (h *Handlers) resolveRun(ctx context.Context, args runArgs, rep request.Reporter) (*jobLimits, *lake.Plan, error) {
	type limits struct {
		lim *jobLimits
		err error
	}
	lc := make(chan limits, 1)
	go func() {
		lim, err := h.limits(ctx, args.Workspace, args.TimeoutSeconds)
		lc <- limits{lim, err}
	}()
	plan, err := h.cfg.Resolver.ResolveRun(ctx, args.Workspace, args.SQL, rep)
	l := <-lc
	if err == nil && l.err != nil {
		plan.Close()
		err = l.err
	}
	if err != nil {
		return nil, nil, err
	}
	return l.lim, plan, nil
}

// runJob runs the plan's setup and blocks within lim; errors are scrubbed of the plan's secrets,
// and a job stopped at a limit says which and how to raise it.
func (h *Handlers) runJob(ctx context.Context, plan *lake.Plan, lim *jobLimits, blocks []string, lastOnly bool, maxBytes int64) (*client.Result, error) {
	c, err := h.client()
	if err != nil {
		return nil, err
	}
	maxBytes = maxResultBytes(maxBytes, h.cfg.MaxResultBytes)
	// dataenv's attaches run as setup; then the runner closes the door on the job's own SQL.
	job := client.Job{Setup: plan.Setup, Probes: plan.Probes, Sandbox: &protocol.Sandbox{AllowedDirectories: plan.AllowedDirectories()},
		Blocks: blocks, MaxResultBytes: maxBytes, CollectLastOnly: lastOnly, Isolation: h.cfg.Isolation}
	for _, d := range plan.Dirs {
		job.Mounts = append(job.Mounts, client.Mount{Path: d.Path, Writable: d.Writable})
		if d.Writable && !d.Cert {
			job.WatchDirs = append(job.WatchDirs, d.Path)
		}
	}
	lim.apply(&job, c.Config().CgroupParent != "")
	start := time.Now()
	res, err := c.Run(ctx, job)
	h.observe(ctx, err, time.Since(start))
	if limit, lerr := lim.limitError(err); lerr != nil && ctx.Err() == nil {
		h.cfg.Metrics.JobLimitHit(limit)
		return nil, request.Refusef("%s", plan.Scrub(lerr.Error()))
	}
	var ce *client.CrashError
	if errors.As(err, &ce) && ctx.Err() == nil {
		return nil, h.crashes.classify(ctx, errors.New(plan.Scrub(ce.Error())))
	}
	if err != nil {
		return nil, jobError(plan, err)
	}
	h.crashes.forget(ctx)
	h.observePhases(res.Phases)
	if len(res.Results) == 0 {
		return nil, errors.New("the DuckDB runner returned no result")
	}
	return res, nil
}

// maxResultBytes is the request's max_result_bytes, else the default, never past the limit.
func maxResultBytes(asked, def int64) int64 {
	if asked <= 0 {
		return def
	}
	return min(asked, MaxResultBytesLimit)
}

// truncatedNote is the marker of a cut result: where, and how to get every row.
func truncatedNote(kept int, limit int64) string {
	return fmt.Sprintf("result truncated: the rows past %d KiB of JSON were dropped (%d rows kept). "+
		"Write every row to a lake table with dataenv.materialize(workspace, 'ducklake://<lake>/<table>', query), "+
		"add a LIMIT or aggregate, or ask for up to %d MiB with dataenv.run(..., max_result_bytes => n)", limit>>10, kept, MaxResultBytesLimit>>20)
}

// observe records a finished runner job in the metrics.
func (h *Handlers) observe(ctx context.Context, err error, d time.Duration) {
	m := h.cfg.Metrics
	var ce *client.CrashError
	var se *client.SpillError
	outcome := metrics.RunnerSucceeded
	switch {
	case err == nil:
	case ctx.Err() != nil:
		outcome = metrics.RunnerCancelled
	case errors.As(err, &ce):
		outcome = metrics.RunnerCrashed
		sig := "none"
		if ce.Signal != 0 {
			sig = signalName(ce)
		}
		m.RunnerCrash(sig)
	case errors.As(err, &se):
		outcome = metrics.RunnerFailed
		m.RunnerSpillStop()
	default:
		outcome = metrics.RunnerFailed
	}
	m.RunnerJobFinished(outcome, d)
}

// signalName is the signal's SIG* name for the metric label.
func signalName(ce *client.CrashError) string {
	names := map[int]string{9: "SIGKILL", 11: "SIGSEGV", 6: "SIGABRT", 7: "SIGBUS", 4: "SIGILL", 15: "SIGTERM", 2: "SIGINT", 8: "SIGFPE"}
	if n, ok := names[int(ce.Signal)]; ok {
		return n
	}
	return fmt.Sprintf("signal_%d", int(ce.Signal))
}

// foreignConnection reports whether a DuckDB error is about a connection the job's own SQL asked
// for (a postgres_scan or ATTACH of a connection string it wrote): DuckDB names the connection
// string it failed to reach, and every one dataenv gives a job carries an application_name
// (fence.AppName). Such a failure is the job's, not a fault another attempt cures.
func foreignConnection(msg string) bool {
	const prefix = "Unable to connect to Postgres at "
	i := strings.Index(msg, prefix)
	if i < 0 {
		return false
	}
	rest := msg[i+len(prefix):]
	if j := strings.Index(rest, ": "); j >= 0 {
		rest = rest[:j]
	}
	return !strings.Contains(rest, "application_name=")
}

// jobError turns a runner error into the request's error text, without secrets.
func jobError(plan *lake.Plan, err error) error {
	var je *client.JobError
	if errors.As(err, &je) {
		if request.TransientText(je.Message) && !foreignConnection(je.Message) { // a catalog connection lost, a server restarting
			return request.Retryable(fmt.Errorf("DuckDB: %s", plan.Scrub(je.Message)))
		}
		return request.Refusef("DuckDB: %s", plan.Scrub(je.Message))
	}
	return errors.New(plan.Scrub(err.Error()))
}

func resultOf(r protocol.Result, plan *lake.Plan, d time.Duration) Result {
	rows := r.Rows
	if rows == nil {
		rows = [][]json.RawMessage{}
	}
	cols := r.Columns
	if cols == nil {
		cols = []protocol.Column{}
	}
	return Result{Columns: cols, Rows: rows, RowCount: len(rows), Truncated: r.Truncated, Notes: plan.Notes,
		Duration: d.Round(time.Millisecond).String()}
}

// scrubbed marshals v and removes the plan's secrets from it (a job could select a connection
// string back).
func scrubbed(plan *lake.Plan, v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(plan.Scrub(string(b))), nil
}
