package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
)

// Env is what every suite shares during one run.
type Env struct {
	Quick   bool   // -quick: short phases, for a smoke run (numbers not worth committing)
	Profile string // -profile DIR: worker subprocesses write CPU profiles there ("" = none)
	Fsync   bool   // the shared cluster keeps fsync and synchronous_commit on (default)
	Nice    int    // scheduling priority of this program, its workers and Postgres
	// ForkSizes (-fork-sizes): the forks suite's parent sizes, comma-separated ("" = 10,100,1000).
	ForkSizes string
	// ForkSteps (-fork-steps): the forks suite prints each timed fork's steps.
	ForkSteps bool
	// ForkClone (-fork-clone, default true): the forks suite measures the reflink clone rows.
	ForkClone bool
	// RunnerPipelineOnly (-runner-pipeline-only): the runner suite leaves out its overhead table.
	RunnerPipelineOnly bool

	exe       string
	started   time.Time
	startLoad string

	pgOnce sync.Once
	pg     *localpg.Cluster
	pgErr  error
	pgVer  string
}

func newEnv() (*Env, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable (for worker subprocesses): %w", err)
	}
	return &Env{exe: exe, started: time.Now(), startLoad: loadAverage()}, nil
}

// LoadSpan is the machine's load average when this run started and now.
func (e *Env) LoadSpan() string {
	return fmt.Sprintf("%s at the start, %s at the end", e.startLoad, loadAverage())
}

// Progress prints a line to stderr with the time since the run started.
func (e *Env) Progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %6.1fs] %s\n", time.Since(e.started).Seconds(), fmt.Sprintf(format, args...))
}

// Postgres returns the run's shared throwaway cluster (wal_level=logical, pg_stat_statements
// preloaded), starting it on first use. Suites create their own databases in it
// (CreateDatabase); main stops it at the end.
func (e *Env) Postgres(ctx context.Context) (*localpg.Cluster, error) {
	e.pgOnce.Do(func() {
		e.Progress("starting PostgreSQL (fsync=%v)", e.Fsync)
		e.pg, e.pgErr = localpg.Start(ctx, localpg.Config{Name: "bench", Fsync: e.Fsync,
			Settings: map[string]string{
				"shared_preload_libraries": "'pg_stat_statements'",
				"pg_stat_statements.max":   "1000",
				"pg_stat_statements.track": "'top'",
				"track_io_timing":          "off",
				"max_connections":          "450",
				"log_min_messages":         "warning",
				"log_min_error_statement":  "panic",
				"autovacuum_naptime":       "10s",
			}})
		if e.pgErr != nil {
			return
		}
		e.pgErr = e.exec(ctx, "postgres", `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
		if e.pgErr == nil {
			e.pgErr = e.queryString(ctx, "postgres", `SHOW server_version`, &e.pgVer)
		}
	})
	return e.pg, e.pgErr
}

// CreateDatabase (re)creates database name in the shared cluster and returns its DSN.
func (e *Env) CreateDatabase(ctx context.Context, name string) (string, error) {
	pg, err := e.Postgres(ctx)
	if err != nil {
		return "", err
	}
	id := pgx.Identifier{name}.Sanitize()
	if err := e.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+id+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if err := e.exec(ctx, "postgres", `CREATE DATABASE `+id); err != nil {
		return "", err
	}
	return pg.DSN(name), nil
}

// SuperDSN is the superuser DSN of database db in the shared cluster.
func (e *Env) SuperDSN(ctx context.Context, db string) (string, error) {
	pg, err := e.Postgres(ctx)
	if err != nil {
		return "", err
	}
	return pg.DSN(db), nil
}

func (e *Env) exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, e.pg.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", firstLine(sql), err)
	}
	return nil
}

func (e *Env) queryString(ctx context.Context, db, sql string, out *string) error {
	conn, err := pgx.Connect(ctx, e.pg.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql).Scan(out)
}

// Machine describes where the numbers come from, for a section's first lines.
func (e *Env) Machine() string {
	pg := "PostgreSQL not started"
	if e.pg != nil {
		durable := "fsync and synchronous_commit on"
		if !e.Fsync {
			durable = "fsync and synchronous_commit OFF"
		}
		pg = fmt.Sprintf("PostgreSQL %s (throwaway cluster, %s)", e.pgVer, durable)
	}
	return fmt.Sprintf("%d CPUs (`nproc`; %s), %s, %s, %s, benchmark processes at nice %d, %s", runtime.NumCPU(), cpuModel(), kernel(), pg,
		runtime.Version(), e.Nice, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func (e *Env) close() {
	if e.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.pg.Stop(ctx); err != nil {
			e.Progress("stopping PostgreSQL: %v", err)
		}
	}
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return "Linux " + strings.TrimSpace(string(b))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// quietLogger logs warnings and errors to stderr with a prefix.
func quietLogger(prefix string) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("in", prefix)
}
