package client

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// ErrResultSymlink is returned when the result path is a symlink: refused, nothing is read.
var ErrResultSymlink = errors.New("the runner's result path is a symlink; refused without reading through it")

// JobError is a job that DuckDB rejected (an SQL error, a failed ATTACH...).
type JobError struct {
	// Block is the index of the failing block, -1 for the job's set-up.
	Block   int
	Message string
}

func (e *JobError) Error() string {
	if e.Block < 0 {
		return "DuckDB job: " + e.Message
	}
	return fmt.Sprintf("DuckDB job, block %d: %s", e.Block+1, e.Message)
}

// CrashError is a runner that ended without a result: killed by a signal or exited abnormally.
type CrashError struct {
	// Signal is the signal that killed the runner, 0 when it exited with ExitCode.
	Signal   syscall.Signal
	ExitCode int
	// Stderr is the tail of the runner's stderr.
	Stderr string
}

func (e *CrashError) Error() string {
	var b strings.Builder
	if e.Signal != 0 {
		fmt.Fprintf(&b, "the DuckDB runner was killed by signal %s (%s)", signalName(e.Signal), e.Signal)
		switch e.Signal {
		case syscall.SIGKILL:
			b.WriteString(": the kernel's out-of-memory killer sends this when memory runs out; " +
				"lower the job's memory_limit or its working set")
		case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGABRT, syscall.SIGILL:
			b.WriteString(": DuckDB or one of its extensions crashed")
		}
	} else {
		fmt.Fprintf(&b, "the DuckDB runner exited with status %d without a result", e.ExitCode)
	}
	b.WriteString("; the sidecar is unaffected and the next job gets a new runner")
	if s := strings.TrimSpace(e.Stderr); s != "" {
		b.WriteString("\nrunner stderr (tail): " + s)
	}
	return b.String()
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGBUS: "SIGBUS",
		syscall.SIGABRT: "SIGABRT", syscall.SIGILL: "SIGILL", syscall.SIGTERM: "SIGTERM",
		syscall.SIGINT: "SIGINT", syscall.SIGFPE: "SIGFPE", syscall.SIGPIPE: "SIGPIPE",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// Limit names: what a *LimitError or a *SpillError stopped.
const (
	LimitTimeout = "timeout"
	LimitMemory  = "memory"
	LimitDisk    = "disk"
)

// LimitError is a job stopped at its timeout (Job.Timeout: it also matches
// context.DeadlineExceeded) or at its memory cgroup's limit (Job.MemoryMax: the kernel's OOM
// killer ended the runner).
type LimitError struct {
	// Limit is LimitTimeout or LimitMemory.
	Limit string
	// Value is the limit as set ("1m0s", "512 MB").
	Value string
	// Detail says what happened.
	Detail string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("DuckDB job stopped at its %s limit of %s: %s", e.Limit, e.Value, e.Detail)
}

// SpillError is a job stopped by the disk watchdog: its work directory (DuckDB's spill, the
// jail's /tmp) plus the files it wrote into Job.WatchDirs (local lake data paths) grew past the cap.
type SpillError struct {
	Used, Cap int64
	// Watched is the part of Used written into Job.WatchDirs.
	Watched int64
}

// Limit is LimitDisk.
func (e *SpillError) Limit() string { return LimitDisk }

func (e *SpillError) Error() string {
	where := "to its work directory"
	if e.Watched > 0 {
		where = fmt.Sprintf("to its work directory and its local lake paths (%d MB of it into the lakes)", e.Watched>>20)
	}
	return fmt.Sprintf("DuckDB job stopped: it wrote %d MB %s, past the spill cap "+
		"of %d MB (the job's disk limit). Raising max_temp_directory_size in the script does "+
		"not lift this cap. Spill less: lower threads, scan fewer columns or rows, aggregate before "+
		"joining, or write large outputs to the lake's object store instead of local files",
		e.Used>>20, where, e.Cap>>20)
}
