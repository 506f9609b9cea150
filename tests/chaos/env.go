package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/tests/testenv"
)

// Names of the installation the harness builds.
const (
	controlDB   = "chaos"
	catalogDB   = "chaos_lake"
	extCluster  = "ext" // the same server, registered as an external cluster with a managed-service-like admin
	parentDB    = "chaos_crm"
	parentRows  = 500
	lakeRows    = 1000
	extAdmin    = "chaos_admin"
	extPassword = "chaos-admin-pw"
	appRole     = "dataenv_chaos_app"
	replRole    = "dataenv_chaos_repl"
)

// harness is one chaos run: a throwaway PostgreSQL cluster holding the control database, the
// external cluster's databases and the lake catalog; the binaries; the sidecar processes; what
// was requested and what was injected.
type harness struct {
	opts    Options
	dir     string // run directory: sidecar logs, lake files
	storage string // file:// root of the lake storage
	pg      *localpg.Cluster
	pool    *pgxpool.Pool // superuser on the control database
	dataenv string        // the shipped dataenv binary (no test hooks)
	runner  string
	removeR func()
	sc      *sidecars

	rngMu sync.Mutex
	rng   *rand.Rand

	recs   tracker
	faults faultLog
}

func newHarness(ctx context.Context, opts Options) (*harness, error) {
	dir, err := os.MkdirTemp("", "dataenv-chaos-")
	if err != nil {
		return nil, err
	}
	h := &harness{opts: opts, dir: dir, storage: filepath.Join(dir, "lakes"),
		rng: rand.New(rand.NewPCG(uint64(opts.Seed), uint64(opts.Seed>>1)+1))}
	opts.Logf("run directory %s (seed %d)", dir, opts.Seed)
	if err := h.build(ctx); err != nil {
		return h, err
	}
	opts.Logf("starting PostgreSQL")
	h.pg, err = localpg.Start(ctx, localpg.Config{Name: "chaos", Logger: slog.New(slog.DiscardHandler),
		Settings: map[string]string{
			// Immediate restarts must not lose a commit a client saw: WAL reaches the OS at commit
			// (fsync stays off: no machine crash is simulated).
			"synchronous_commit": "on",
			"max_connections":    "300",
			"log_min_messages":   "fatal",
		}})
	if err != nil {
		return h, fmt.Errorf("start PostgreSQL: %w", err)
	}
	if err := h.install(ctx); err != nil {
		return h, err
	}
	h.sc = newSidecars(h)
	return h, nil
}

// build compiles the shipped dataenv binary and the runner.
func (h *harness) build(ctx context.Context) error {
	h.opts.Logf("building dataenv and dataenv-runner")
	h.dataenv = filepath.Join(h.dir, "dataenv")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", h.dataenv, "./sidecar/cmd/dataenv")
	cmd.Dir = moduleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build dataenv: %w\n%s", err, out)
	}
	var err error
	h.runner, h.removeR, err = testenv.BuildRunnerBinary(ctx)
	return err
}

// install creates the control database, installs dataenv, registers the external cluster and
// builds the workspace the forks are made of: a parent database on the external cluster and a
// lake with a table.
func (h *harness) install(ctx context.Context) error {
	if err := h.execDB(ctx, "postgres", `CREATE DATABASE `+controlDB, `CREATE DATABASE `+catalogDB,
		fmt.Sprintf(`CREATE ROLE %s LOGIN CREATEDB CREATEROLE PASSWORD '%s'`, extAdmin, extPassword)); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, h.pg.DSN(controlDB))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := install.Install(ctx, conn, install.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return fmt.Errorf("install dataenv: %w", err)
	}
	if h.pool, err = pgxpool.New(ctx, h.pg.DSN(controlDB)); err != nil {
		return err
	}
	return h.execDB(ctx, controlDB,
		fmt.Sprintf(`SELECT dataenv.register_cluster('%s', '%s', %d, '%s', '%s', 'disable')`, extCluster, h.pg.Host(), h.pg.Port(), extAdmin, extPassword),
		fmt.Sprintf(`SELECT dataenv.update_cluster('%s', app_role => '%s', replication_role => '%s')`, extCluster, appRole, replRole),
		`SELECT dataenv.create_workspace('prod')`,
		fmt.Sprintf(`SELECT dataenv.add_storage('local', 'file://%s')`, h.storage),
	)
}

// prepare runs, with a sidecar but before any fault, what the workload stands on: the cluster
// set up, the parent database created through dataenv and filled, the lake and its table.
func (h *harness) prepare(ctx context.Context) error {
	steps := []struct {
		kind string
		args map[string]any
	}{
		{"setup_cluster", map[string]any{"cluster": extCluster}},
		{"create_database", map[string]any{"cluster": extCluster, "name": parentDB}},
	}
	for _, s := range steps {
		row, err := h.call(ctx, s.kind, s.args)
		if err != nil {
			return err
		}
		if row.Status != "succeeded" {
			return fmt.Errorf("prepare %s: %s: %s", s.kind, row.Status, row.errText())
		}
	}
	if err := h.execDB(ctx, parentDB, `SET ROLE `+appRole,
		`CREATE TABLE customers (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE)`,
		`CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint REFERENCES customers (id), amount numeric(12,2))`,
		fmt.Sprintf(`INSERT INTO customers (email) SELECT 'c' || g || '@x' FROM generate_series(1, %d) g`, parentRows),
		`INSERT INTO orders (customer_id, amount) SELECT id, id FROM customers`); err != nil {
		return err
	}
	if err := h.execDB(ctx, controlDB,
		fmt.Sprintf(`SELECT dataenv.add_datatable('prod', 'crm', '%s', '%s')`, extCluster, parentDB),
		fmt.Sprintf(`SELECT dataenv.add_lake('prod', 'main', 'instance', '%s', 'local', 'lakes/main')`, catalogDB)); err != nil {
		return err
	}
	row, err := h.call(ctx, "materialize", map[string]any{"workspace": "prod", "target": "ducklake://main/orders",
		"query": fmt.Sprintf("SELECT range AS id FROM range(%d)", lakeRows), "strategy": "replace"})
	if err != nil {
		return err
	}
	if row.Status != "succeeded" {
		return fmt.Errorf("prepare materialize: %s: %s", row.Status, row.errText())
	}
	return nil
}

// execDB runs statements on a database of the cluster as the superuser, in order.
func (h *harness) execDB(ctx context.Context, db string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, h.pg.DSN(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func (h *harness) close(keep bool) {
	if h.sc != nil {
		h.sc.stopAll()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	if h.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = h.pg.Stop(ctx)
		cancel()
	}
	if h.removeR != nil {
		h.removeR()
	}
	if !keep {
		_ = os.RemoveAll(h.dir)
	}
}

// randFloat and randDuration are the run's seeded randomness.
func (h *harness) randFloat() float64 {
	h.rngMu.Lock()
	defer h.rngMu.Unlock()
	return h.rng.Float64()
}

func (h *harness) randDuration(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.randFloat()*float64(hi-lo))
}
