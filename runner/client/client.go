package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dataenv/dataenv/runner/protocol"
)

// Client runs DuckDB jobs in dataenv-runner processes.
type Client struct {
	cfg       Config
	installMu sync.Mutex

	mu sync.Mutex
	// pools are the warm spares, per isolation mode and (jailed) set of mounts (spares.go).
	pools map[spareKey]*sparePool
	// changed is closed (and replaced) whenever a spare has started or failed to.
	changed chan struct{}
	closed  bool
	// background counts spare starts and discards still running (under mu), and backgroundDone
	// is signalled when it drops to zero: Close waits for them, so that every spare's work
	// directory is gone when it returns.
	background     int
	backgroundDone *sync.Cond
}

// New returns a Client. It fails when the runner binary cannot be found.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.CgroupParent != "" {
		sweepStaleCgroups(cfg.CgroupParent)
	}
	c := &Client{cfg: cfg, pools: map[spareKey]*sparePool{}, changed: make(chan struct{})}
	c.backgroundDone = sync.NewCond(&c.mu)
	return c, nil
}

// Config returns the client's configuration with defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Run runs job in a runner process of its own and returns its rows. Cancelling ctx kills the
// runner's whole process group. Errors: *JobError (DuckDB refused the SQL), *CrashError (the
// runner died: the signal is named), *SpillError (the disk watchdog stopped it), *LimitError
// (Job.Timeout passed: it matches context.DeadlineExceeded too; or the kernel ended the runner
// at its cgroup's Job.MemoryMax), ErrResultSymlink, or the context's error.
func (c *Client) Run(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	if job.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, job.Timeout, &LimitError{Limit: LimitTimeout,
			Value: job.Timeout.String(), Detail: fmt.Sprintf("the job ran longer than its timeout of %s", job.Timeout)})
		defer cancel()
	}
	mode, req, err := c.prepare(ctx, job)
	if err != nil {
		return nil, err
	}
	p, warm, afterwards, err := c.process(mode, job.Mounts)
	if err != nil {
		return nil, err
	}
	defer afterwards()
	defer c.cleanupAfterExit(p)
	if job.Started != nil {
		job.Started(p.cmd.Process.Pid)
	}
	if err := p.limitMemory(job.MemoryMax); err != nil {
		p.kill()
		return nil, err
	}
	p.memoryValue = fmt.Sprintf("%d MB", job.MemoryMax>>20)
	p.watch(c.diskCap(job), job.WatchDirs, c.cfg.SpillPoll)
	req.ExtensionDirectory = c.extDirInside(mode)
	req.TempDirectory = p.work.spillInside()
	req.ResultPath = p.work.resultInside()
	if job.Sandbox != nil {
		sb := *job.Sandbox
		sb.AllowedDirectories = append(append([]string{}, sb.AllowedDirectories...), p.work.tmpInside()+"/")
		req.Sandbox = &sb
	}
	// A runner that could not take its job (a jail that failed to start, say) has exited or
	// is exiting: finish reports how, with its stderr.
	sendErr := p.send(req)
	maxResponse := req.MaxResultBytes + resultOverheadBytes
	if len(req.Probes) > 0 {
		maxResponse += protocol.MaxProbeBytes
	}
	resp, err := p.finish(ctx, maxResponse)
	if err != nil && sendErr != nil {
		err = fmt.Errorf("%w (%v)", err, sendErr)
	}
	c.cfg.Logger.Debug("duckdb job", "isolation", mode, "warm", warm, "duration", time.Since(start), "error", err)
	if err != nil {
		return nil, err
	}
	return &Result{
		Results: resp.Results, Probes: resp.Probes, Isolation: mode, Warm: warm, Duration: time.Since(start), Phases: resp.Phases,
		Stdout: p.stdout.String(), Stderr: p.stderr.String(),
		StdoutBytes: p.stdout.Total(), StderrBytes: p.stderr.Total(),
	}, nil
}

// prepare decides the job's isolation and builds its request; for a jailed job it installs the
// extensions the job may load outside the jail first.
func (c *Client) prepare(ctx context.Context, job Job) (Isolation, *protocol.Request, error) {
	mode, err := resolve(job.Isolation, c.cfg.Isolation, c.cfg.Jail)
	if err != nil {
		return mode, nil, err
	}
	if err := checkMounts(job.Mounts); err != nil {
		return mode, nil, err
	}
	req, err := job.request(c.cfg)
	if err != nil {
		return mode, nil, err
	}
	if mode == IsolationJailed {
		if err := c.installOutside(ctx, job.Blocks); err != nil {
			return mode, nil, err
		}
		req.Blocks = unforce(req.Blocks)
	}
	return mode, req, nil
}

// process returns a runner for mode and mounts (a jailed job's): a live warm spare kept for
// exactly that, else a new one. A taken spare is replaced once the job is done (afterwards) while
// the pool still holds another for the next job: a runner's start (DuckDB open, extensions
// loaded) is a few hundred milliseconds of CPU, and on a small machine a replacement warming
// while the job runs slowed the job by half (BENCHMARKS.md, suite runner). The last spare taken
// is replaced at once, so that a job coming meanwhile finds one starting. Without a spare the
// pool is refilled once the job is done, so that no spare's start competes with the job's own
// cold start.
func (c *Client) process(mode Isolation, mounts []Mount) (p *process, warm bool, afterwards func(), err error) {
	key, mounts, ok := keyOf(mode, mounts)
	afterwards = func() {}
	if !c.cfg.WarmSpare || !ok {
		p, err := c.spawn(mode, false, mounts)
		return p, false, afterwards, err
	}
	c.mu.Lock()
	c.poolLocked(key, mounts, true)
	c.mu.Unlock()
	for {
		spare, left := c.takeSpare(key)
		if spare == nil {
			// A spare being started (its process not up yet) is ahead of a new runner: wait for it.
			c.mu.Lock()
			starting := c.waitStartingLocked(key)
			c.mu.Unlock()
			if starting == nil {
				break
			}
			<-starting
			continue
		}
		select {
		case <-spare.done: // died while waiting: not usable
			spare.cleanup()
		default:
			if left {
				return spare, true, func() { c.refillAsync(key) }, nil
			}
			c.refillAsync(key)
			return spare, true, afterwards, nil
		}
	}
	// Reserved before the job's result is returned: the caller's next job finds it.
	afterwards = func() { c.refillAsync(key) }
	p, err = c.spawn(mode, true, mounts)
	return p, false, afterwards, err
}

// diskCap is the job's disk limit: Job.DiskCap, else Config.SpillCap.
func (c *Client) diskCap(job Job) int64 {
	if job.DiskCap > 0 {
		return job.DiskCap
	}
	return c.cfg.SpillCap
}
