package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dataenv/dataenv/runner/protocol"
)

// Client runs DuckDB jobs in dataenv-runner processes.
type Client struct {
	cfg       Config
	installMu sync.Mutex

	mu     sync.Mutex
	spares map[Isolation][]*process
	// starting counts spares being started per mode, so concurrent refills do not overshoot.
	starting map[Isolation]int
	// changed is closed (and replaced) whenever a spare has started or failed to.
	changed chan struct{}
	closed  bool
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
	return &Client{cfg: cfg, spares: map[Isolation][]*process{}, starting: map[Isolation]int{},
		changed: make(chan struct{})}, nil
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
	p, warm, err := c.process(mode, job.Mounts)
	if err != nil {
		return nil, err
	}
	defer p.cleanup()
	if c.cfg.WarmSpare {
		// The next spare warms up once this job is done, not while it competes for the CPU.
		defer func() { go c.refill(mode) }()
	}
	if job.Started != nil {
		job.Started(p.cmd.Process.Pid)
	}
	if err := p.limitMemory(job.MemoryMax); err != nil {
		p.kill()
		return nil, err
	}
	p.memoryValue = fmt.Sprintf("%d MB", job.MemoryMax>>20)
	p.watch(c.diskCap(job), job.WatchDirs, c.cfg.SpillPoll)
	if job.DiskCap > 0 {
		req.MaxTempDirectorySize = fmt.Sprintf("%dKiB", job.DiskCap>>10)
	}
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
	resp, err := p.finish(ctx, req.MaxResultBytes+resultOverheadBytes)
	if err != nil && sendErr != nil {
		err = fmt.Errorf("%w (%v)", err, sendErr)
	}
	c.cfg.Logger.Debug("duckdb job", "isolation", mode, "warm", warm, "duration", time.Since(start), "error", err)
	if err != nil {
		return nil, err
	}
	return &Result{
		Results: resp.Results, Isolation: mode, Warm: warm, Duration: time.Since(start),
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

// process returns a runner for mode: the warm spare when there is a live one, else a new one.
// A jailed job with mounts gets a runner of its own (a spare's mounts are set already).
func (c *Client) process(mode Isolation, mounts []Mount) (*process, bool, error) {
	if mode != IsolationJailed {
		mounts = nil
	}
	if !c.cfg.WarmSpare || len(mounts) > 0 {
		p, err := c.spawn(mode, false, mounts)
		return p, false, err
	}
	for {
		spare := c.takeSpare(mode)
		if spare == nil {
			break
		}
		select {
		case <-spare.done: // died while waiting: not usable
			spare.cleanup()
		default:
			return spare, true, nil
		}
	}
	p, err := c.spawn(mode, true, nil)
	return p, false, err
}

// takeSpare removes the oldest spare of mode from the pool (nil when there is none): whoever
// takes it is its only user.
func (c *Client) takeSpare(mode Isolation) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	pool := c.spares[mode]
	if len(pool) == 0 {
		return nil
	}
	p := pool[0]
	c.spares[mode] = pool[1:]
	return p
}

// Spares is how many spare runners of mode are in the pool now.
func (c *Client) Spares(mode Isolation) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.spares[mode])
}

// Prewarm fills the pool of spare runners for mode (WarmSpares of them; Config.WarmSpare or
// WarmSpares only) and waits until each has DuckDB open with the required extensions loaded,
// or ctx ends.
func (c *Client) Prewarm(ctx context.Context, mode Isolation) error {
	if !c.cfg.WarmSpare {
		return errors.New("Prewarm needs Config.WarmSpare or Config.WarmSpares")
	}
	m, err := resolve(mode, c.cfg.Isolation, c.cfg.Jail)
	if err != nil {
		return err
	}
	c.refill(m)
	var pool []*process
	for {
		c.mu.Lock()
		pool = append([]*process(nil), c.spares[m]...)
		starting, changed := c.starting[m], c.changed
		c.mu.Unlock()
		if starting == 0 {
			break
		}
		// Another refill is starting spares: wait for it.
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(pool) == 0 {
		return fmt.Errorf("no spare %s runner could be started", m)
	}
	for _, p := range pool {
		select {
		case <-p.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// refill starts spares of mode until the pool holds WarmSpares (counting those starting).
func (c *Client) refill(mode Isolation) {
	for {
		c.mu.Lock()
		if c.closed || len(c.spares[mode])+c.starting[mode] >= c.cfg.WarmSpares {
			c.mu.Unlock()
			return
		}
		c.starting[mode]++
		c.mu.Unlock()
		p, err := c.spawn(mode, true, nil)
		c.mu.Lock()
		c.starting[mode]--
		close(c.changed)
		c.changed = make(chan struct{})
		if err != nil {
			c.mu.Unlock()
			c.cfg.Logger.Warn("start a spare DuckDB runner", "isolation", mode, "error", err)
			return
		}
		if c.closed {
			c.mu.Unlock()
			go discard(p)
			return
		}
		c.spares[mode] = append(c.spares[mode], p)
		c.mu.Unlock()
	}
}

// Close stops the spare runners.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	spares := c.spares
	c.spares = map[Isolation][]*process{}
	c.mu.Unlock()
	for _, pool := range spares {
		for _, p := range pool {
			discard(p)
		}
	}
	return nil
}

func discard(p *process) {
	p.kill()
	p.cleanup()
}

// diskCap is the job's disk limit: Job.DiskCap, else Config.SpillCap.
func (c *Client) diskCap(job Job) int64 {
	if job.DiskCap > 0 {
		return job.DiskCap
	}
	return c.cfg.SpillCap
}
