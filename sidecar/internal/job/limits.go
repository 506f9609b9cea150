package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Limits bound one DuckDB job. The installation's defaults (Config.Limits, the sidecar's --job-*
// flags) apply where a workspace and its ancestors set nothing (dataenv.set_job_limits); a
// request may ask for a shorter timeout.
type Limits struct {
	// Timeout is the job's wall-clock limit.
	Timeout time.Duration
	// MemoryBytes is DuckDB's memory_limit; with a cgroup (Config.Runner.CgroupParent) the
	// runner's cgroup allows MemoryBytes plus headroom (cgroupBytes) for what DuckDB does not count.
	MemoryBytes int64
	// Threads is DuckDB's threads.
	Threads int
	// DiskBytes bounds spill and scratch space plus bytes written into the workspace's local
	// lake paths; it is DuckDB's max_temp_directory_size too.
	DiskBytes int64
}

// Installation defaults of Limits.
const (
	DefaultTimeout     = time.Hour
	DefaultMemoryBytes = 2_000_000_000
	DefaultThreads     = 2
	DefaultDiskBytes   = 10_000_000_000
)

// DefaultLimits are the defaults of an installation whose flags set nothing.
func DefaultLimits() Limits {
	return Limits{Timeout: DefaultTimeout, MemoryBytes: DefaultMemoryBytes, Threads: DefaultThreads, DiskBytes: DefaultDiskBytes}
}

// withDefaults fills the zero fields of l from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Threads <= 0 {
		l.Threads = d.Threads
	}
	if l.DiskBytes <= 0 {
		l.DiskBytes = d.DiskBytes
	}
	return l
}

// cgroupBytes is the runner's cgroup limit for a DuckDB memory_limit of mem: DuckDB's limit
// covers its buffer manager, not every allocation, so the cgroup allows half as much again (at
// least 256 MiB more).
func cgroupBytes(mem int64) int64 { return mem + max(mem/2, 256<<20) }

// sizeRE is a size as DuckDB writes it.
var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$`)

var sizeUnits = map[string]float64{"": 1, "b": 1, "bytes": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}

// ParseBytes reads a size as DuckDB (and dataenv.set_job_limits) does: "512MB", "4GB", "1.5GiB"
// (KB = 1000, KiB = 1024), a bare number of bytes.
func ParseBytes(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size: write a number and a unit, such as 512MB, 4GB or 1.5GiB", s)
	}
	unit, ok := sizeUnits[strings.ToLower(m[2])]
	n, err := strconv.ParseFloat(m[1], 64)
	if !ok || err != nil || n*unit <= 0 || n*unit >= math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size: write a number and a unit, such as 512MB, 4GB or 1.5GiB", s)
	}
	return int64(n * unit), nil
}

// FormatBytes writes n the way a person reads a limit: "2.0 GB", "512 MB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%d MB", n/1e6)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// jobLimits are a job's limits and, per limit, where it comes from.
type jobLimits struct {
	Limits
	workspace string
	from      map[string]string // client.LimitTimeout... → "workspace x" or "the installation's default"
	asked     bool              // the request asked for its own timeout
}

const effectiveLimitsSQL = `
SELECT extract(epoch FROM timeout)::float8, coalesce(timeout_from, ''), memory_bytes, coalesce(memory_from, ''),
       threads, coalesce(threads_from, ''), disk_bytes, coalesce(disk_from, '')
  FROM dataenv.job_limits_effective_all WHERE workspace = $1`

// limits resolves the limits of a job of workspace: the nearest setting of its fork chain, else
// the installation's default; timeoutSeconds > 0 asks for a shorter timeout.
func (h *Handlers) limits(ctx context.Context, workspace string, timeoutSeconds float64) (*jobLimits, error) {
	var secs *float64
	var mem, disk *int64
	var threads *int32
	var tFrom, mFrom, thFrom, dFrom string
	err := h.cfg.Control.QueryRow(ctx, effectiveLimitsSQL, workspace).Scan(&secs, &tFrom, &mem, &mFrom, &threads, &thFrom, &disk, &dFrom)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, request.Retryable(fmt.Errorf("read the job limits of workspace %q: %w", workspace, err))
	}
	l := &jobLimits{Limits: h.cfg.Limits, workspace: workspace, from: map[string]string{}}
	from := func(limit, ws string, set bool) {
		l.from[limit] = "the installation's default (dataenv sidecar --job-" + limit + ")"
		if set {
			l.from[limit] = "set on workspace " + strconv.Quote(ws)
		}
	}
	if secs != nil {
		l.Timeout = time.Duration(*secs * float64(time.Second))
	}
	if mem != nil {
		l.MemoryBytes = *mem
	}
	if threads != nil {
		l.Threads = int(*threads)
	}
	if disk != nil {
		l.DiskBytes = *disk
	}
	from(client.LimitTimeout, tFrom, secs != nil)
	from(client.LimitMemory, mFrom, mem != nil)
	from("threads", thFrom, threads != nil)
	from(client.LimitDisk, dFrom, disk != nil)
	if timeoutSeconds > 0 {
		asked := time.Duration(timeoutSeconds * float64(time.Second))
		if asked > l.Timeout {
			return nil, request.Refusef("timeout %s is longer than the job timeout of workspace %q (%s, %s): ask for a shorter one, "+
				"or an administrator raises it with dataenv.set_job_limits(%s, timeout => '...')",
				asked, workspace, l.Timeout, l.from[client.LimitTimeout], sqlLiteral(workspace))
		}
		l.Timeout, l.asked = asked, true
		l.from[client.LimitTimeout] = "asked for by the request (timeout => ...)"
	}
	return l, nil
}

// apply sets the limits on a runner job.
func (l *jobLimits) apply(job *client.Job, cgroup bool) {
	job.Timeout = l.Timeout
	job.MemoryLimit = fmt.Sprintf("%dKiB", l.MemoryBytes>>10)
	job.Threads = l.Threads
	job.DiskCap = l.DiskBytes
	if cgroup {
		job.MemoryMax = cgroupBytes(l.MemoryBytes)
	}
}

// limitError is the request's error for a job stopped at one of its limits, naming the limit,
// where it comes from and how to raise it; "" limit when err is not a limit.
func (l *jobLimits) limitError(err error) (limit string, out error) {
	var le *client.LimitError
	var se *client.SpillError
	var je *client.JobError
	var detail string
	switch {
	case errors.As(err, &le):
		limit, detail = le.Limit, le.Detail
	case errors.As(err, &se):
		limit = client.LimitDisk
		detail = fmt.Sprintf("it used %d MB of disk, %d MB of it written into local lake paths", se.Used>>20, se.Watched>>20)
	case errors.As(err, &je) && strings.HasPrefix(je.Message, "Out of Memory Error"):
		limit, detail = client.LimitMemory, firstLine(je.Message)
		if strings.Contains(je.Message, "max_temp_directory_size") {
			limit = client.LimitDisk
		}
	default:
		return "", nil
	}
	ws := sqlLiteral(l.workspace)
	switch limit {
	case client.LimitTimeout:
		raise := fmt.Sprintf("an administrator raises it with dataenv.set_job_limits(%s, timeout => '2 hours')", ws)
		if l.asked {
			raise = "ask for a longer timeout (up to the workspace's), or " + raise
		}
		return limit, fmt.Errorf("DuckDB job stopped at its time limit: it ran longer than its timeout of %s (%s); "+
			"the runner was killed. Make the job faster, or %s", l.Timeout, l.from[limit], raise)
	case client.LimitMemory:
		return limit, fmt.Errorf("DuckDB job stopped at its memory limit of %s (%s): %s. Use less memory "+
			"(fewer columns or rows, aggregate before joining; DuckDB spills what it can), or an administrator raises it "+
			"with dataenv.set_job_limits(%s, memory => '8GB')", FormatBytes(l.MemoryBytes), l.from[limit], detail, ws)
	default:
		return limit, fmt.Errorf("DuckDB job stopped at its disk limit of %s (%s), which counts spill, scratch files "+
			"and bytes written into the workspace's local lake paths: %s. Spill less (lower threads, aggregate before joining), "+
			"write less, or an administrator raises it with dataenv.set_job_limits(%s, disk => '50GB')",
			FormatBytes(l.DiskBytes), l.from[limit], detail, ws)
	}
}

// firstLine is the first line of a DuckDB error (DuckDB's errors go on with advice a job cannot
// follow, such as SET statements the sandbox refuses).
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// sqlLiteral is s as an SQL string literal, for hints a person copies.
func sqlLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
