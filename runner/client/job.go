package client

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dataenv/dataenv/runner/protocol"
)

// Job is one DuckDB job.
type Job struct {
	// Setup are the caller's own statements, run before Blocks and not collected (secrets,
	// attaches); see protocol.Request.
	Setup []string
	// Probes run after Setup, before Sandbox and Blocks; their rows are Result.Probes
	// (protocol.Request.Probes).
	Probes []string
	// Sandbox, when set, confines Blocks once Setup has run (protocol.Sandbox). The job's
	// scratch directory (its /tmp) is allowed in addition to Sandbox.AllowedDirectories.
	Sandbox *protocol.Sandbox
	// Blocks are SQL texts run in order on one connection (see protocol.Request).
	Blocks []string
	// Args are set as DuckDB variables: getvariable('name').
	Args map[string]any
	// MemoryLimit is DuckDB's memory_limit ("2GB"); empty uses Config.MemoryLimit.
	MemoryLimit string
	// Threads is DuckDB's threads; 0 keeps DuckDB's default.
	Threads int
	// MemoryMax, when positive and Config.CgroupParent is set, is the memory limit in bytes of
	// the runner's own cgroup: past it the kernel's OOM killer ends the job (a *LimitError).
	// Set it above MemoryLimit: DuckDB's limit covers its buffers, not every allocation.
	MemoryMax int64
	// DiskCap, when positive, replaces Config.SpillCap for this job and is DuckDB's
	// max_temp_directory_size (set before the job's SQL; a sandboxed job cannot raise it).
	DiskCap int64
	// WatchDirs are host directories (the job's writable local lake paths): the files the job
	// writes or rewrites there count toward its disk cap, with its work directory.
	WatchDirs []string
	// MaxResultBytes bounds the rows' JSON; 0 uses Config.MaxResultBytes.
	MaxResultBytes int64
	// CollectLastOnly keeps only the last block's rows.
	CollectLastOnly bool
	// Timeout, when positive, stops the job (its whole process group) after this long.
	Timeout time.Duration
	// Mounts are host directories a jailed job sees at the same path (a file:// lake's data
	// path, say). Ignored outside the jail, where the host's file system is visible anyway.
	// What a job writes there is not counted by the spill watchdog.
	Mounts []Mount
	// Isolation overrides Config.Isolation for this job.
	Isolation Isolation
	// Started, when set, is called with the runner's process-group id once it runs.
	Started func(pgid int)
	// TestHook is passed to the runner, which honours it only when the client's environment
	// has DATAENV_RUNNER_TEST_HOOKS=1. Tests only.
	TestHook *protocol.TestHook
}

// Result is a finished job.
type Result struct {
	// Results holds one entry per block (only the last with CollectLastOnly).
	Results []protocol.Result
	// Probes holds one entry per Job.Probes statement.
	Probes []protocol.Result
	// Stdout and Stderr are the tails of the runner's output; the totals count every byte. A
	// warm spare's result is read as soon as the runner says it is written, while the runner
	// exits: output the runner printed just before may not be in yet.
	Stdout, Stderr           string
	StdoutBytes, StderrBytes int64
	// Isolation is the mode the job ran in.
	Isolation Isolation
	// Warm is true when the job ran on a spare runner started ahead of it.
	Warm     bool
	Duration time.Duration
	// Phases is where the runner's part of Duration went.
	Phases protocol.Phases
}

// Mount is a host directory bound into the jail at the same path.
type Mount struct {
	// Path is an absolute host directory.
	Path     string
	Writable bool
}

// checkMounts refuses what would hide or expose the jail's own mounts.
func checkMounts(ms []Mount) error {
	for _, m := range ms {
		p := filepath.Clean(m.Path)
		if !filepath.IsAbs(m.Path) || p == "/" || p == "/tmp" || p == jailRoot || strings.HasPrefix(p, jailRoot+"/") ||
			p == "/proc" || strings.HasPrefix(p, "/proc/") || p == "/dev" || strings.HasPrefix(p, "/dev/") {
			return fmt.Errorf("mount %q: want an absolute directory that is not /, /tmp, %s, /proc or /dev, nor inside one of the last three", m.Path, jailRoot)
		}
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("mount %q: %w", m.Path, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("mount %q: not a directory", m.Path)
		}
	}
	return nil
}

func (j Job) request(cfg Config) (*protocol.Request, error) {
	args := make(map[string]json.RawMessage, len(j.Args))
	for k, v := range j.Args {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		args[k] = b
	}
	maxBytes := j.MaxResultBytes
	if maxBytes <= 0 {
		maxBytes = cfg.MaxResultBytes
	}
	mem := j.MemoryLimit
	if mem == "" {
		mem = cfg.MemoryLimit
	}
	req := &protocol.Request{
		Mode: protocol.ModeRun, Setup: j.Setup, Probes: j.Probes, Blocks: j.Blocks, Args: args, MemoryLimit: mem,
		Threads: j.Threads, MaxResultBytes: maxBytes, CollectLastOnly: j.CollectLastOnly,
		TestHook: j.TestHook,
	}
	if j.DiskCap > 0 {
		req.MaxTempDirectorySize = fmt.Sprintf("%dKiB", j.DiskCap>>10)
	}
	return req, nil
}
