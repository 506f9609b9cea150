package client

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

// EnvRunnerPath overrides where the runner binary is found.
const EnvRunnerPath = "DATAENV_RUNNER_PATH"

// RunnerName is the runner binary's file name.
const RunnerName = "dataenv-runner"

// Defaults of Config.
const (
	DefaultSpillCap     = 10 << 30
	DefaultSpillPoll    = 200 * time.Millisecond
	DefaultOutputTail   = 8 << 10
	DefaultOOMScoreAdj  = 800
	DefaultWaitDelay    = 2 * time.Second
	resultOverheadBytes = 4 << 20
)

// DefaultWarmSpares is the sidecar's default pool of spares per isolation mode
// (--job-warm-spares): two, so that a job taking one leaves another for the next job while its
// replacement waits for the first job to end (Client.Run).
const DefaultWarmSpares = 2

// DefaultMountedSpareSets is Config.MountedSpareSets's default.
const DefaultMountedSpareSets = 4

// Config configures a Client. The zero value works: every field has a documented default.
type Config struct {
	// RunnerPath is the dataenv-runner binary. Default: $DATAENV_RUNNER_PATH, else
	// dataenv-runner next to the current executable.
	RunnerPath string
	// Isolation is used for jobs that do not choose one. Default IsolationAuto.
	Isolation Isolation
	// Jail picks the jail program of IsolationJailed: "nsjail" or "bwrap"; default nsjail when
	// installed, else bwrap.
	Jail string
	// MemoryLimit is DuckDB's memory_limit for jobs that set none; empty keeps DuckDB's
	// default (80% of RAM).
	MemoryLimit string
	// ExtensionDir is DuckDB's extension_directory (runner/extension.Dir() by default).
	ExtensionDir string
	// WorkRoot holds the per-job work directories. Default $TMPDIR/dataenv-runner-jobs.
	WorkRoot string
	// SpillCap stops a job whose work directory uses more disk than this many bytes.
	// Default DefaultSpillCap (10 GiB); negative disables the watchdog.
	SpillCap int64
	// SpillPoll is how often the watchdog measures the work directory. Default 200 ms.
	SpillPoll time.Duration
	// OutputTail is how many trailing bytes of stdout and of stderr are kept. Default 8 KiB.
	OutputTail int
	// MaxResultBytes bounds a job's rows (JSON) when the job does not. Default 10 MiB.
	MaxResultBytes int64
	// OOMScoreAdj is the runner's oom_score_adj (-1000..1000). Default 800.
	OOMScoreAdj int
	// Cgroup, when set, is a cgroup directory (v1 or v2) every runner joins before exec, so
	// the runner and whatever wraps it are in it from their first instruction: give it a memory
	// limit and the kernel's OOM killer acts inside it, never on the sidecar.
	Cgroup string
	// CgroupParent, when set, is a memory cgroup directory (v1 memory controller, or v2 handing
	// memory down to its children) under which every runner gets a cgroup of its own, joined
	// before exec and removed after the job; Job.MemoryMax is its limit. OwnMemoryCgroup finds
	// one where the machine allows it. Cgroup is ignored when this is set.
	CgroupParent string
	// WaitDelay bounds how long Wait waits for the output pipes after the runner is killed.
	// Default 2 s.
	WaitDelay time.Duration
	// WarmSpare keeps one runner started ahead of the next job: process started, DuckDB open,
	// the required extensions loaded. Same as WarmSpares = 1.
	WarmSpare bool
	// WarmSpares is how many spare runners are kept per isolation mode (0: none, unless
	// WarmSpare). Each runs one job and exits: a spare is never reused; a new one is started in
	// the background as soon as a job takes one (it warms while that job runs), or once the job
	// is done when the job found none.
	WarmSpares int
	// MountedSpareSets is how many sets of Job.Mounts (a jailed job's local lake directories)
	// keep WarmSpares spares of their own: a jail's mounts are fixed when it starts, so a spare
	// is bound to exactly one set and serves only jobs with exactly that set, the directories
	// being the same ones (device and inode) as when it started. A set earns spares at its
	// second job; past this many sets the least recently used lose theirs. Default
	// DefaultMountedSpareSets; negative: jailed jobs with mounts never run on a spare.
	MountedSpareSets int
	// SpareJob is what the jobs a spare takes usually ask for (the installation's default
	// limits): a spare sets it before its job arrives, and a job asking for the same sets
	// nothing then. A job asking for other values sets its own.
	SpareJob SpareJob
	// Logger receives one line per job. Default: discard.
	Logger *slog.Logger
}

// SpareJob are the DuckDB settings a spare sets ahead of its job: Job's fields of the same names.
type SpareJob struct {
	MemoryLimit string
	Threads     int
	DiskCap     int64
}

func (c Config) withDefaults() (Config, error) {
	var err error
	if c.RunnerPath == "" {
		if c.RunnerPath, err = RunnerPath(); err != nil {
			return c, err
		}
	}
	if c.ExtensionDir == "" {
		if c.ExtensionDir, err = extension.Dir(); err != nil {
			return c, err
		}
	}
	if c.WorkRoot == "" {
		c.WorkRoot = filepath.Join(os.TempDir(), "dataenv-runner-jobs")
	}
	if c.SpillCap == 0 {
		c.SpillCap = DefaultSpillCap
	}
	if c.SpillPoll <= 0 {
		c.SpillPoll = DefaultSpillPoll
	}
	if c.OutputTail <= 0 {
		c.OutputTail = DefaultOutputTail
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = protocol.DefaultMaxResultBytes
	}
	if c.OOMScoreAdj == 0 {
		c.OOMScoreAdj = DefaultOOMScoreAdj
	}
	if c.WaitDelay <= 0 {
		c.WaitDelay = DefaultWaitDelay
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.MountedSpareSets == 0:
		c.MountedSpareSets = DefaultMountedSpareSets
	case c.MountedSpareSets < 0:
		c.MountedSpareSets = 0
	}
	if c.WarmSpare && c.WarmSpares < 1 {
		c.WarmSpares = 1
	}
	c.WarmSpare = c.WarmSpares > 0
	return c, nil
}

// RunnerPath finds the runner: $DATAENV_RUNNER_PATH, else dataenv-runner next to the current
// executable. The error says how to fix a missing binary.
func RunnerPath() (string, error) {
	if p := os.Getenv(EnvRunnerPath); p != "" {
		return filepath.Abs(p)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locate the current executable to find %s: %w", RunnerName, err)
	}
	p := filepath.Join(filepath.Dir(exe), RunnerName)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("DuckDB jobs need %s next to %s: build it with `make build`, "+
			"or point %s at it", RunnerName, exe, EnvRunnerPath)
	}
	return p, nil
}
