package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

// process is one started runner: in its work directory, waiting for its job on stdin.
type process struct {
	mode    Isolation
	work    *workDir
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *tail
	stderr  *tail
	ctx     context.Context
	cancel  context.CancelCauseFunc
	done    chan struct{}
	waitErr error
	started time.Time
	// ready is closed once a preloading runner has DuckDB open with the extensions loaded
	// (or has died); nil without preload.
	ready chan struct{}
	// written is closed once a preloading runner says its result file is whole; nil without
	// preload.
	written chan struct{}
	// cg is the runner's own memory cgroup (Config.CgroupParent), nil without one.
	cg *jobCgroup
	// memoryValue is the cgroup's limit as a person reads it, for the error.
	memoryValue string
}

// spawn starts a runner in mode. With preload, DuckDB opens and loads the required extensions
// before the job arrives (a warm spare). The process runs until its job ends or cancel.
func (c *Client) spawn(mode Isolation, preload bool, mounts []Mount) (*process, error) {
	w, err := newWorkDir(c.cfg.WorkRoot, mode == IsolationJailed)
	if err != nil {
		return nil, err
	}
	var cg *jobCgroup
	cgroup := c.cfg.Cgroup
	if c.cfg.CgroupParent != "" {
		if cg, err = newJobCgroup(c.cfg.CgroupParent); err != nil {
			w.remove()
			return nil, err
		}
		cgroup = cg.dir
	}
	var runnerArgs []string
	if preload {
		runnerArgs = append([]string{"--extension-dir", c.extDirInside(mode),
			"--preload", strings.Join(extension.Required, ","), "--ready-fd", "3"}, c.spareSettings(w)...)
	}
	argv, env, err := c.argv(mode, w, mounts, runnerArgs, cgroup)
	if err != nil {
		w.remove()
		if cg != nil {
			cg.remove()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &process{mode: mode, work: w, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		stdout: newTail(c.cfg.OutputTail), stderr: newTail(c.cfg.OutputTail), started: time.Now(), cg: cg}
	if err := p.start(ctx, argv, env, c.cfg.WaitDelay, preload); err != nil {
		cancel(nil)
		p.cleanup()
		return nil, fmt.Errorf("start the DuckDB runner (%s, %s): %w", mode, argv[0], err)
	}
	return p, nil
}

// spareSettings are the runner flags that set, ahead of the job, the settings a job of
// Config.SpareJob sends on a spare in w: made by the same Job.request, so the runner sees them
// equal.
func (c *Client) spareSettings(w *workDir) []string {
	sj := c.cfg.SpareJob
	req, err := Job{MemoryLimit: sj.MemoryLimit, Threads: sj.Threads, DiskCap: sj.DiskCap}.request(c.cfg)
	if err != nil { // only a job's Args can fail to encode, and this one has none
		return nil
	}
	args := []string{"--temp-directory", w.spillInside()}
	if req.MemoryLimit != "" {
		args = append(args, "--memory-limit", req.MemoryLimit)
	}
	if req.Threads > 0 {
		args = append(args, "--threads", strconv.Itoa(req.Threads))
	}
	if req.MaxTempDirectorySize != "" {
		args = append(args, "--max-temp-directory-size", req.MaxTempDirectorySize)
	}
	return args
}

// watch starts the disk watchdog of the job the runner takes: its work directory and the growth
// of dirs count toward limit. It ends when the runner has exited (a job that ends well never
// cancels p.ctx).
func (p *process) watch(limit int64, dirs []string, poll time.Duration) {
	w := newDiskWatch(p.work.host, dirs, limit, poll)
	go w.run(p.ctx, p.done, func(err error) { p.cancel(err) })
}

// limitMemory sets the memory limit of the runner's cgroup (none without one, or with bytes 0).
func (p *process) limitMemory(bytes int64) error {
	if p.cg == nil || bytes <= 0 {
		return nil
	}
	if err := p.cg.setLimit(bytes); err != nil {
		return fmt.Errorf("set the job's memory limit on its cgroup %s: %w", p.cg.dir, err)
	}
	return nil
}

// cleanupAfterExit removes p's work directory and cgroup once it has exited: at once when it
// has, else in the background, counted for Close (a runner whose result was read as soon as it
// was written is still exiting).
func (c *Client) cleanupAfterExit(p *process) {
	select {
	case <-p.done:
		p.cleanup()
		return
	default:
	}
	c.mu.Lock()
	c.background++
	c.mu.Unlock()
	go func() {
		defer c.backgroundEnded()
		select {
		case <-p.done:
		case <-time.After(exitGrace):
			// Its result is in; whatever keeps it from exiting is not worth waiting for.
			p.kill()
		}
		p.cleanup()
	}()
}

// exitGrace is how long a runner whose result was read is given to exit before it is killed.
const exitGrace = 10 * time.Second

// cleanup removes the work directory and the cgroup of a runner that is gone (or never ran).
func (p *process) cleanup() {
	p.work.remove()
	if p.cg != nil {
		p.cg.remove()
	}
}

// start execs argv as the leader of a new process group whose every member is killed when ctx
// ends, and reaps it in the background.
func (p *process) start(ctx context.Context, argv, env []string, waitDelay time.Duration, ready bool) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, p.work.host, p.stdout, p.stderr
	cmd.SysProcAttr = sysProcAttr(p.mode)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return err
	}
	var readyR *os.File
	if ready {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer w.Close()
		readyR, cmd.ExtraFiles = r, []*os.File{w}
	}
	if err := cmd.Start(); err != nil {
		if readyR != nil {
			readyR.Close()
		}
		return err
	}
	p.cmd = cmd
	if readyR != nil {
		p.ready, p.written = make(chan struct{}), make(chan struct{})
		go func() {
			defer readyR.Close()
			// One byte when the preload is done, or EOF when the runner died first; then
			// another once its result file is whole.
			b := make([]byte, 1)
			readyR.Read(b)
			close(p.ready)
			if n, _ := readyR.Read(b); n == 1 && b[0] == protocol.WrittenByte {
				close(p.written)
			}
		}()
	}
	go func() {
		// Once the leader has exited, and before it is reaped (so its pid, the group's id,
		// cannot be reused meanwhile), kill whatever is left of its group.
		waitExited(cmd.Process.Pid)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return nil
}

// waitExited blocks until pid has exited without reaping it: waitid(P_PID, WEXITED|WNOWAIT).
func waitExited(pid int) {
	const pPID, wNOWAIT = 1, 0x01000000
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|wNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// extDirInside is the extension directory as the runner sees it.
func (c *Client) extDirInside(mode Isolation) string {
	if mode == IsolationJailed {
		return jailExtension
	}
	return c.cfg.ExtensionDir
}

// send gives the runner its job on stdin.
func (p *process) send(req *protocol.Request) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, werr := p.stdin.Write(data)
	cerr := p.stdin.Close()
	if werr != nil {
		return fmt.Errorf("send the job to the runner: %w", werr)
	}
	return cerr
}

// finish waits for the runner, or kills its group when ctx ends first, and turns what happened
// into the job's response or an error.
func (p *process) finish(ctx context.Context, maxResult int64) (*protocol.Response, error) {
	stop := context.AfterFunc(ctx, func() { p.cancel(causeOf(ctx)) })
	defer stop()
	select {
	case <-p.done:
	case <-p.written:
		if resp, ok, err := p.writtenResult(maxResult); ok {
			return resp, err
		}
		<-p.done
	}
	if cause := context.Cause(p.ctx); cause != nil {
		var spill *SpillError
		if errors.As(cause, &spill) {
			return nil, spill
		}
		return nil, fmt.Errorf("DuckDB job cancelled, runner stopped: %w", cause)
	}
	if crash := p.crash(); crash != nil {
		if crash.Signal == syscall.SIGKILL && p.cg != nil && p.cg.oomKills() > 0 {
			return nil, &LimitError{Limit: LimitMemory, Value: p.memoryValue,
				Detail: "the runner used all the memory its cgroup allows and the kernel's out-of-memory killer ended it"}
		}
		return nil, crash
	}
	resp, err := readResult(p.work.resultHost(), maxResult)
	if err != nil {
		if errors.Is(err, ErrResultSymlink) {
			return nil, err
		}
		return nil, fmt.Errorf("%w (runner exit status %d; stderr tail: %s)", err,
			p.cmd.ProcessState.ExitCode(), p.stderr.String())
	}
	return resp, jobError(resp)
}

// jobError is the *JobError of a response whose block failed, else nil.
func jobError(resp *protocol.Response) error {
	if resp.Error != "" {
		return &JobError{Block: resp.ErrorBlock, Message: resp.Error}
	}
	return nil
}

// writtenResult is the response of a runner that said its result is whole and may still be
// exiting; ok is false when it must be waited for (the job was stopped, or the file does not
// read).
func (p *process) writtenResult(maxResult int64) (resp *protocol.Response, ok bool, err error) {
	if context.Cause(p.ctx) != nil {
		return nil, false, nil
	}
	resp, rerr := readResult(p.work.resultHost(), maxResult)
	if rerr != nil {
		return nil, false, nil
	}
	return resp, true, jobError(resp)
}

// causeOf is ctx's cause wrapping ctx.Err(), so errors.Is(err, context.Canceled) and
// errors.Is(err, context.DeadlineExceeded) hold however the cause was set.
func causeOf(ctx context.Context) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, ctx.Err()) {
		return cause
	}
	return fmt.Errorf("%w: %w", ctx.Err(), cause)
}

// crash reports a runner killed by a signal or ending with a status that means no result: 2
// (bad request) or a jail's 128+signal for a runner it lost to a signal (bwrap and nsjail
// report a dead child that way).
func (p *process) crash() *CrashError {
	st := p.cmd.ProcessState
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch code := st.ExitCode(); {
	case ws.Signaled():
		return &CrashError{Signal: ws.Signal(), Stderr: p.stderr.String()}
	case code > 128 && code < 128+65 && p.mode == IsolationJailed:
		return &CrashError{Signal: syscall.Signal(code - 128), Stderr: p.stderr.String()}
	case code == 0 || code == 1:
		return nil
	default:
		return &CrashError{ExitCode: code, Stderr: p.stderr.String()}
	}
}

// kill ends the runner's group and waits for it.
func (p *process) kill() {
	p.cancel(errors.New("runner discarded"))
	<-p.done
}
