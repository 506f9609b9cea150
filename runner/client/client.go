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
	spares map[Isolation]*process
	closed bool
}

// New returns a Client. It fails when the runner binary cannot be found.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, spares: map[Isolation]*process{}}, nil
}

// Config returns the client's configuration with defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// Run runs job in a runner process of its own and returns its rows. Cancelling ctx kills the
// runner's whole process group. Errors: *JobError (DuckDB refused the SQL), *CrashError (the
// runner died: the signal is named), *SpillError (the watchdog stopped it),
// ErrResultSymlink, or the context's error (context.Canceled, or context.DeadlineExceeded
// when Job.Timeout passed).
func (c *Client) Run(ctx context.Context, job Job) (*Result, error) {
	start := time.Now()
	if job.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, job.Timeout,
			fmt.Errorf("the job ran longer than its timeout of %s", job.Timeout))
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
	defer p.work.remove()
	if c.cfg.WarmSpare {
		// The next spare warms up once this job is done, not while it competes for the CPU.
		defer func() { go c.refill(mode) }()
	}
	if job.Started != nil {
		job.Started(p.cmd.Process.Pid)
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
	c.mu.Lock()
	spare := c.spares[mode]
	delete(c.spares, mode)
	c.mu.Unlock()
	if spare != nil {
		select {
		case <-spare.done: // died while waiting: not usable
			spare.work.remove()
		default:
			return spare, true, nil
		}
	}
	p, err := c.spawn(mode, true, nil)
	return p, false, err
}

// Prewarm starts the spare runner for mode unless there is one (WarmSpare only) and waits
// until it has DuckDB open with the required extensions loaded, or ctx ends.
func (c *Client) Prewarm(ctx context.Context, mode Isolation) error {
	if !c.cfg.WarmSpare {
		return errors.New("Prewarm needs Config.WarmSpare")
	}
	m, err := resolve(mode, c.cfg.Isolation, c.cfg.Jail)
	if err != nil {
		return err
	}
	c.refill(m)
	c.mu.Lock()
	p := c.spares[m]
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no spare %s runner could be started", m)
	}
	select {
	case <-p.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) refill(mode Isolation) {
	c.mu.Lock()
	if c.closed || c.spares[mode] != nil {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	p, err := c.spawn(mode, true, nil)
	if err != nil {
		c.cfg.Logger.Warn("start a spare DuckDB runner", "isolation", mode, "error", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.spares[mode] != nil {
		go discard(p)
		return
	}
	c.spares[mode] = p
}

// Close stops the spare runners.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	spares := c.spares
	c.spares = map[Isolation]*process{}
	c.mu.Unlock()
	for _, p := range spares {
		discard(p)
	}
	return nil
}

func discard(p *process) {
	p.kill()
	p.work.remove()
}
