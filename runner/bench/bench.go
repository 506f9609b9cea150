// Package bench measures what running a DuckDB job in a process of its own costs: per job,
// spawn + open DuckDB + load ducklake + attach a DuckLake catalog + a trivial query, against the
// same work in-process, and with a warm spare runner started ahead of the job.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

// Config says what to measure.
type Config struct {
	// Client configures the runner client (RunnerPath, ExtensionDir...). WarmSpare is set by
	// Overhead where it needs it.
	Client client.Config
	// Isolation of the spawned runs; default IsolationAuto (jailed when bubblewrap is there).
	Isolation client.Isolation
	// CatalogDSN is the Postgres database holding the DuckLake catalog (libpq URL or
	// key=value). Required.
	CatalogDSN string
	// DataPath is the lake's DATA_PATH; default a temporary directory, removed afterwards.
	DataPath string
	// MetadataSchema is the catalog's schema; default "dataenv_bench".
	MetadataSchema string
	// Iterations per variant; default 20.
	Iterations int
}

// Stats are the latencies of one variant.
type Stats struct {
	Median, P90, Min, Max time.Duration
}

// Report is the outcome of Overhead.
type Report struct {
	Iterations int
	Isolation  client.Isolation
	// InProcess opens a new DuckDB each time, like a spawned runner does.
	InProcess Stats
	// InProcessWarm reuses nothing either but starts timing once DuckDB is open with the
	// extensions loaded: the in-process counterpart of a warm spare.
	InProcessWarm Stats
	Spawned       Stats
	WarmSpare     Stats
	// WarmSpareWatched is WarmSpare with the lake's data path watched for the job's disk limit,
	// as the sidecar watches a local lake, holding WatchedFiles files besides the lake's own.
	WarmSpareWatched Stats
	WatchedFiles     int
	// SpawnedRatio and WarmRatio are medians divided by the in-process median; WarmVsWarmRatio
	// is the warm spare's median divided by the warm in-process median.
	SpawnedRatio, WarmRatio, WarmVsWarmRatio float64
}

// Overhead runs the three variants Iterations times each, in the same process and run, and
// reports medians and ratios. The lake (one table) is created first and left in the catalog.
func Overhead(ctx context.Context, cfg Config) (Report, error) {
	cfg, cleanup, err := cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	defer cleanup()
	cold, err := client.New(cfg.Client)
	if err != nil {
		return Report{}, err
	}
	defer cold.Close()
	warmCfg := cfg.Client
	warmCfg.WarmSpares = client.DefaultWarmSpares // as the sidecar keeps them
	warm, err := client.New(warmCfg)
	if err != nil {
		return Report{}, err
	}
	defer warm.Close()
	j := newJob(cfg, cold.Config().ExtensionDir)
	if err := j.setUp(ctx); err != nil {
		return Report{}, err
	}
	rep := Report{Iterations: cfg.Iterations}
	if rep.InProcess, err = measure(cfg.Iterations, func() error { return j.inProcess(ctx) }, nil); err != nil {
		return rep, fmt.Errorf("in-process: %w", err)
	}
	var in *engine.Instance
	openWarm := func() (err error) {
		in, err = engine.Open(ctx, j.extDir, extension.Required...)
		return err
	}
	if rep.InProcessWarm, err = measure(cfg.Iterations, func() error { return j.onInstance(ctx, in) }, openWarm); err != nil {
		return rep, fmt.Errorf("in-process, warm: %w", err)
	}
	var iso client.Isolation
	runOn := func(c *client.Client) func() error {
		return func() error {
			res, err := c.Run(ctx, client.Job{Blocks: j.blocks, Isolation: cfg.Isolation, CollectLastOnly: true})
			if err == nil {
				iso = res.Isolation
			}
			return err
		}
	}
	if rep.Spawned, err = measure(cfg.Iterations, runOn(cold), nil); err != nil {
		return rep, fmt.Errorf("spawned runner: %w", err)
	}
	prewarm := func() error { return warm.Prewarm(ctx, cfg.Isolation) }
	if rep.WarmSpare, err = measure(cfg.Iterations, runOn(warm), prewarm); err != nil {
		return rep, fmt.Errorf("warm spare runner: %w", err)
	}
	if rep.WarmSpareWatched, rep.WatchedFiles, err = watchedLake(ctx, cfg, j, warm, prewarm); err != nil {
		return rep, fmt.Errorf("warm spare runner, watched lake: %w", err)
	}
	rep.Isolation = iso
	rep.SpawnedRatio = float64(rep.Spawned.Median) / float64(rep.InProcess.Median)
	rep.WarmRatio = float64(rep.WarmSpare.Median) / float64(rep.InProcess.Median)
	rep.WarmVsWarmRatio = float64(rep.WarmSpare.Median) / float64(rep.InProcessWarm.Median)
	return rep, nil
}

// withDefaults fills in cfg's defaults; cleanup removes the temporary data path it made.
func (cfg Config) withDefaults() (Config, func(), error) {
	if cfg.CatalogDSN == "" {
		return cfg, nil, errors.New("bench: Config.CatalogDSN (the DuckLake catalog database) is required")
	}
	if cfg.Iterations <= 0 {
		cfg.Iterations = 20
	}
	if cfg.MetadataSchema == "" {
		cfg.MetadataSchema = "dataenv_bench"
	}
	cleanup := func() {}
	if cfg.DataPath == "" {
		dir, err := os.MkdirTemp("", "dataenv-bench-lake-")
		if err != nil {
			return cfg, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		cfg.DataPath = dir + string(filepath.Separator)
	}
	return cfg, cleanup, nil
}

// Warm is the warm in-process variant (DuckDB already open with the extensions loaded), one job
// at a time, for a caller that interleaves it with measurements of its own so that both see the
// same load on a machine where it drifts.
type Warm struct {
	j       *job
	cleanup func()
}

// NewWarm sets up the bench lake (its own METADATA_SCHEMA and DATA_PATH when cfg names none: use
// one Overhead does not) and returns its warm in-process variant. Close it.
func NewWarm(ctx context.Context, cfg Config) (*Warm, error) {
	cfg, cleanup, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	extDir := cfg.Client.ExtensionDir
	if extDir == "" {
		if extDir, err = extension.Dir(); err != nil {
			cleanup()
			return nil, err
		}
	}
	w := &Warm{j: newJob(cfg, extDir), cleanup: cleanup}
	if err := w.j.setUp(ctx); err != nil {
		cleanup()
		return nil, err
	}
	return w, nil
}

// Time opens DuckDB and loads the required extensions (untimed), then times the job on it.
func (w *Warm) Time(ctx context.Context) (time.Duration, error) {
	in, err := engine.Open(ctx, w.j.extDir, extension.Required...)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = w.j.onInstance(ctx, in)
	return time.Since(start), err
}

// Close removes the temporary data path.
func (w *Warm) Close() { w.cleanup() }

// measure times fn n times; before, when set, runs untimed ahead of each call.
func measure(n int, fn, before func() error) (Stats, error) {
	d := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		if before != nil {
			if err := before(); err != nil {
				return Stats{}, err
			}
		}
		start := time.Now()
		if err := fn(); err != nil {
			return Stats{}, err
		}
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	return Stats{Median: d[len(d)/2], P90: d[len(d)*9/10], Min: d[0], Max: d[len(d)-1]}, nil
}

// String renders the report as a Markdown table for BENCHMARKS.md.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "DuckDB job overhead: open + LOAD ducklake + ATTACH a DuckLake catalog (Postgres) + trivial query, %d runs each, runner isolation %s\n\n", r.Iterations, r.Isolation)
	b.WriteString("| variant | median | p90 | min | max | median / in-process |\n|---|---|---|---|---|---|\n")
	row := func(name string, s Stats, ratio float64) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2f× |\n", name, ms(s.Median), ms(s.P90), ms(s.Min), ms(s.Max), ratio)
	}
	row("in-process (baseline)", r.InProcess, 1)
	row("spawned runner", r.Spawned, r.SpawnedRatio)
	row("in-process, DuckDB already open + extensions loaded", r.InProcessWarm,
		float64(r.InProcessWarm.Median)/float64(r.InProcess.Median))
	row("warm spare runner (open + loaded ahead of the job)", r.WarmSpare, r.WarmRatio)
	row(fmt.Sprintf("warm spare runner, the lake's data path watched for the disk limit and holding %d more files", r.WatchedFiles),
		r.WarmSpareWatched, float64(r.WarmSpareWatched.Median)/float64(r.InProcess.Median))
	fmt.Fprintf(&b, "\nwarm spare / warm in-process: %.2f×; watched lake of %d files / warm spare: %.2f×\n", r.WarmVsWarmRatio,
		r.WatchedFiles, float64(r.WarmSpareWatched.Median)/float64(r.WarmSpare.Median))
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// job is the measured work.
type job struct {
	extDir string
	blocks []string
	setup  []string
}

func newJob(cfg Config, extDir string) *job {
	attach := fmt.Sprintf("ATTACH %s AS lake (DATA_PATH %s, METADATA_SCHEMA %s, META_SCHEMA %s)",
		quote("ducklake:postgres:"+cfg.CatalogDSN), quote(cfg.DataPath), quote(cfg.MetadataSchema), quote(cfg.MetadataSchema))
	return &job{
		extDir: extDir,
		blocks: []string{"LOAD ducklake", attach, "SELECT count(*) FROM lake.bench"},
		setup: []string{"LOAD ducklake", attach,
			"CREATE TABLE IF NOT EXISTS lake.bench AS SELECT range AS id FROM range(1000)"},
	}
}

func (j *job) setUp(ctx context.Context) error {
	return j.runInProcess(ctx, j.setup)
}

func (j *job) inProcess(ctx context.Context) error {
	return j.runInProcess(ctx, j.blocks)
}

// onInstance runs the job on an open instance and closes it.
func (j *job) onInstance(ctx context.Context, in *engine.Instance) error {
	defer in.Close()
	resp := engine.RunOn(ctx, in, &protocol.Request{Blocks: j.blocks, CollectLastOnly: true}, nil)
	if resp.Error != "" {
		return fmt.Errorf("block %d: %s", resp.ErrorBlock, resp.Error)
	}
	return nil
}

func (j *job) runInProcess(ctx context.Context, blocks []string) error {
	tmp, err := os.MkdirTemp("", "dataenv-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	resp := engine.Run(ctx, &protocol.Request{Blocks: blocks, ExtensionDirectory: j.extDir,
		CollectLastOnly: true, TempDirectory: filepath.Join(tmp, "spill")}, nil)
	if resp.Error != "" {
		return fmt.Errorf("block %d: %s", resp.ErrorBlock, resp.Error)
	}
	return nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// watchedFiles is how many files watchedLake adds to the lake's data path: a lake written in
// small batches and not compacted yet holds as many.
const watchedFiles = 50000

// watchedLake times the warm spare job with the lake's data path watched, as a job on a local
// lake is (its writes there count toward its disk limit), once watchedFiles more files are in it.
func watchedLake(ctx context.Context, cfg Config, j *job, warm *client.Client, prewarm func() error) (Stats, int, error) {
	dir := filepath.Join(cfg.DataPath, "bench-watched-files")
	defer os.RemoveAll(dir)
	for i := range watchedFiles {
		sub := filepath.Join(dir, fmt.Sprintf("table_%03d", i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return Stats{}, 0, err
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("ducklake-%05d.parquet", i)), []byte("PAR1"), 0o644); err != nil {
			return Stats{}, 0, err
		}
	}
	syscall.Sync() // the files' writeback is not the job's
	st, err := measure(cfg.Iterations, func() error {
		_, err := warm.Run(ctx, client.Job{Blocks: j.blocks, Isolation: cfg.Isolation, CollectLastOnly: true,
			WatchDirs: []string{cfg.DataPath}})
		return err
	}, prewarm)
	return st, watchedFiles, err
}
