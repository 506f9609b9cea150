package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The forks suite: how long create_fork takes to make a datatable's copy, for a parent with 10,
// 100 and 1000 tables, schema_only and full_copy, side by side in the same run with the plain
// operations they are built on: CREATE DATABASE ... TEMPLATE and pg_dump --schema-only | psql;
// then full_copy by reflink clone on PostgreSQL 18 (forkclone.go).
// The fork handlers run in-process against the bench cluster's "instance" cluster (the request
// pipeline's own cost is the pipeline suite's subject).

func init() { Register(forkSuite{}) }

type forkSuite struct{}

func (forkSuite) Name() string { return "forks" }

// ForkRow is one parent size: the median time of each operation.
type ForkRow struct {
	Tables, Runs                 int
	SchemaOnly, FullCopy         time.Duration
	Template, DumpPsql           time.Duration
	SchemaOnlyMethod, FullMethod string
}

func (forkSuite) Run(ctx context.Context, env *Env) (string, error) {
	start := time.Now()
	sizes, reps := []int{10, 100, 1000}, 3
	if env.Quick {
		sizes, reps = []int{10, 100}, 1
	}
	if v := os.Getenv("DATAENV_BENCH_FORK_SIZES"); v != "" { // e.g. "1000": explore one size
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return "", fmt.Errorf("DATAENV_BENCH_FORK_SIZES: %q is not a table count", f)
			}
			sizes = append(sizes, n)
		}
	}
	fb, err := newForkBench(ctx, env)
	if err != nil {
		return "", err
	}
	defer fb.close()
	rows, err := ForkBench(ctx, env, fb, sizes, reps)
	if err != nil {
		return "", err
	}
	clones, skipped, err := CloneBench(ctx, env, fb, reps)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(renderForks(env, rows, reps, time.Since(start)))
	renderClone(&b, clones, skipped, reps)
	return b.String(), nil
}

// ForkBench measures fork creation for parents of each size (reps runs each, median kept).
func ForkBench(ctx context.Context, env *Env, fb *forkBench, sizes []int, reps int) ([]ForkRow, error) {
	var out []ForkRow
	for i, n := range sizes {
		r := reps
		if n >= 1000 {
			r = 1 // about a minute a run: one keeps the suite within its budget
		}
		env.Progress("forks: parent with %d tables, %d run(s)", n, r)
		row, err := fb.measure(ctx, n, r, i == 0)
		if err != nil {
			return nil, fmt.Errorf("%d tables: %w", n, err)
		}
		out = append(out, row)
	}
	return out, nil
}

type forkBench struct {
	*benchSidecar
	env *Env
	dsn func(db string) string
	// libpqEnv reaches the cluster as the superuser for the plain pg_dump | psql
	libpqEnv []string
}

func newForkBench(ctx context.Context, env *Env) (*forkBench, error) {
	pg, err := env.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := installedControl(ctx, env, "bench_forks_control")
	if err != nil {
		return nil, err
	}
	fb := &forkBench{benchSidecar: sc, env: env, dsn: pg.DSN,
		libpqEnv: append(os.Environ(), "PGHOST="+pg.Host(), fmt.Sprintf("PGPORT=%d", pg.Port()), "PGUSER="+pg.SuperUser,
			"PGPASSWORD="+pg.SuperPassword, "PGSSLMODE=disable")}
	if _, err := fb.handle(ctx, "setup_cluster", map[string]any{"cluster": "instance"}); err != nil {
		return nil, fmt.Errorf("setup of the instance cluster: %w", err)
	}
	return fb, nil
}

// measure builds a parent with n tables and times each operation reps times.
func (fb *forkBench) measure(ctx context.Context, n, reps int, warmup bool) (ForkRow, error) {
	row := ForkRow{Tables: n, Runs: reps}
	parent := fmt.Sprintf("bench_forks_parent_%d", n)
	if err := fb.makeParent(ctx, parent, n); err != nil {
		return row, err
	}
	ws := fmt.Sprintf("bench-%d", n)
	if err := fb.exec(ctx, "bench_forks_control", `SELECT dataenv.create_workspace($1)`, ws); err != nil {
		return row, err
	}
	if err := fb.exec(ctx, "bench_forks_control", `SELECT dataenv.add_datatable($1, 'd', 'instance', $2)`, ws, parent); err != nil {
		return row, err
	}
	if warmup { // the first fork of the run pays for cold caches: not timed
		if _, _, err := fb.fork(ctx, ws, ws+"-warmup", "schema_only"); err != nil {
			return row, err
		}
	}
	var so, fc, tpl, dp []time.Duration
	for i := range reps {
		d, err := fb.plainTemplate(ctx, parent)
		if err != nil {
			return row, err
		}
		tpl = append(tpl, d)
		d, m, err := fb.fork(ctx, ws, fmt.Sprintf("%s-fc-%d", ws, i), "full_copy")
		if err != nil {
			return row, err
		}
		fc, row.FullMethod = append(fc, d), m
		if d, m, err = fb.fork(ctx, ws, fmt.Sprintf("%s-so-%d", ws, i), "schema_only"); err != nil {
			return row, err
		}
		so, row.SchemaOnlyMethod = append(so, d), m
		if d, err = fb.plainDumpPsql(ctx, parent); err != nil {
			return row, err
		}
		dp = append(dp, d)
	}
	row.SchemaOnly, row.FullCopy, row.Template, row.DumpPsql = medianDuration(so), medianDuration(fc), medianDuration(tpl), medianDuration(dp)
	return row, nil
}

// fork times one create_fork run on the sidecar, then drops the fork (not timed).
func (fb *forkBench) fork(ctx context.Context, parent, fork, mode string) (time.Duration, string, error) {
	if err := fb.settle(ctx); err != nil {
		return 0, "", err
	}
	res, took, err := fb.handleTimed(ctx, "create_fork", map[string]any{"parent": parent, "fork": fork,
		"datatables": map[string]string{"d": mode}})
	if err != nil {
		return 0, "", fmt.Errorf("create_fork %s: %w", mode, err)
	}
	var r struct {
		Datatables []struct {
			Method string `json:"method"`
		} `json:"datatables"`
	}
	_ = json.Unmarshal(res, &r)
	method := ""
	if len(r.Datatables) == 1 {
		method = r.Datatables[0].Method
	}
	if _, err := fb.handle(ctx, "drop_fork", map[string]any{"fork": fork}); err != nil {
		return 0, "", fmt.Errorf("drop_fork: %w", err)
	}
	return took, method, nil
}

// makeParent (re)creates a database with n tables: a primary key, a unique and a check
// constraint, a secondary index and 20 rows each; vacuumed (frozen).
func (fb *forkBench) makeParent(ctx context.Context, db string, n int) error {
	if _, err := fb.env.CreateDatabase(ctx, db); err != nil {
		return err
	}
	var ddl strings.Builder
	for i := range n {
		fmt.Fprintf(&ddl, `CREATE TABLE t%[1]d (id bigserial PRIMARY KEY, code text NOT NULL UNIQUE, qty int CHECK (qty >= 0),
			at timestamptz NOT NULL DEFAULT now());
			CREATE INDEX t%[1]d_at_idx ON t%[1]d (at);
			INSERT INTO t%[1]d (code, qty) SELECT 'c' || g, g FROM generate_series(1, 20) g;
`, i)
	}
	if err := fb.exec(ctx, db, ddl.String()); err != nil {
		return err
	}
	// Settle the new rows (hint bits, visibility map) so the first copy does not pay for it.
	return fb.exec(ctx, db, `VACUUM (FREEZE, ANALYZE)`)
}

// plainTemplate times CREATE DATABASE ... TEMPLATE parent (then drops the copy).
func (fb *forkBench) plainTemplate(ctx context.Context, parent string) (time.Duration, error) {
	copyDB := "bench_forks_plain_template"
	_ = fb.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+copyDB)
	if err := fb.settle(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := fb.exec(ctx, "postgres", `CREATE DATABASE `+copyDB+` TEMPLATE `+pgx.Identifier{parent}.Sanitize()); err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, fb.exec(ctx, "postgres", `DROP DATABASE `+copyDB)
}

// plainDumpPsql times CREATE DATABASE + pg_dump --schema-only parent | psql (then drops the copy).
func (fb *forkBench) plainDumpPsql(ctx context.Context, parent string) (time.Duration, error) {
	copyDB := "bench_forks_plain_dump"
	_ = fb.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+copyDB)
	if err := fb.settle(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := fb.exec(ctx, "postgres", `CREATE DATABASE `+copyDB); err != nil {
		return 0, err
	}
	dump := exec.CommandContext(ctx, "pg_dump", "--schema-only", "--no-owner", "-d", parent)
	psql := exec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", copyDB)
	dump.Env, psql.Env = fb.libpqEnv, fb.libpqEnv // the password stays out of argv
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	dump.Stdout, psql.Stdin = w, r
	var dErr, pErr strings.Builder
	dump.Stderr, psql.Stderr = &dErr, &pErr
	if err := psql.Start(); err != nil {
		return 0, err
	}
	if err := dump.Start(); err != nil {
		return 0, err
	}
	_ = w.Close()
	_ = r.Close()
	de, pe := dump.Wait(), psql.Wait()
	took := time.Since(start)
	if de != nil || pe != nil {
		return 0, fmt.Errorf("pg_dump | psql: %v %s / %v %s", de, dErr.String(), pe, pErr.String())
	}
	return took, fb.exec(ctx, "postgres", `DROP DATABASE `+copyDB)
}

// settle runs a CHECKPOINT before each timed operation, so that none of them pays for the dirty
// buffers the previous one left (CREATE DATABASE flushes them).
func (fb *forkBench) settle(ctx context.Context) error { return fb.exec(ctx, "postgres", `CHECKPOINT`) }

func (fb *forkBench) exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, fb.dsn(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("%s: %w", firstLine(sql), err)
	}
	return nil
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func renderForks(env *Env, rows []ForkRow, reps int, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Fork creation: create_fork vs. the plain operations (suite `forks`)\n\n")
	w("Measured on %s; the suite took %s; each cell is the median of %d runs (one for 1000 tables).", env.Machine(), took.Round(time.Second), reps)
	if env.Quick {
		w(" **Quick run (-quick): not for comparison.**")
	}
	w("\n\n")
	w("Parent: N tables, each with a primary key, a unique and a check constraint, a secondary index and 20 rows, vacuumed. ")
	w("create_fork runs in-process (the handler, not the request pipeline) and includes the lifecycle lock, the registry row, ")
	w("the marked database (staging name, comment, rename, record) and the fork's workspace commit. Each timed operation starts after a CHECKPOINT. Milliseconds.\n\n")
	w("| tables | schema_only fork | pg_dump --schema-only \\| psql | ratio | full_copy fork | CREATE DATABASE … TEMPLATE | ratio | schema_only / full_copy |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		w("| %d | %s | %s | %s | %s | %s | %s | %s |\n", r.Tables, ms(r.SchemaOnly), ms(r.DumpPsql),
			ratio(float64(r.SchemaOnly), float64(r.DumpPsql)), ms(r.FullCopy), ms(r.Template),
			ratio(float64(r.FullCopy), float64(r.Template)), ratio(float64(r.SchemaOnly), float64(r.FullCopy)))
	}
	w("\nMethods used: ")
	for i, r := range rows {
		if i > 0 {
			w("; ")
		}
		w("%d tables: schema_only by %s, full_copy by %s", r.Tables, r.SchemaOnlyMethod, r.FullMethod)
	}
	w(".\n\n")
	if len(rows) >= 2 {
		first, last := rows[0], rows[len(rows)-1]
		k := float64(last.Tables) / float64(first.Tables)
		w("Growth from %d to %d tables (×%.0f): schema_only ×%.1f, pg_dump | psql ×%.1f, full_copy ×%.1f, TEMPLATE ×%.1f.\n\n",
			first.Tables, last.Tables, k, float64(last.SchemaOnly)/float64(first.SchemaOnly), float64(last.DumpPsql)/float64(first.DumpPsql),
			float64(last.FullCopy)/float64(first.FullCopy), float64(last.Template)/float64(first.Template))
	}
	w("%s", forkMethod)
	return b.String()
}

const forkMethod = `How to read it: a schema_only fork is a pg_dump --schema-only piped through the sidecar
into psql --single-transaction (after SET ROLE to the cluster's application role), so it tracks
the plain dump | psql and grows with the number of objects. The plain psql commits every statement
(each commit waits for its WAL flush), which is why it can be the slower one at 1000 tables. A
full_copy fork of a parent nobody is connected to is CREATE DATABASE ... TEMPLATE, whose cost grows
with the files to copy; the fork's fixed overhead (about 100-200 ms here: a few admin connections,
the staging name, comment and rename, the registry and the workspace commit) shows at 10 tables and
vanishes in the copy at 1000. With other sessions on the parent a full copy falls back to
pg_dump | pg_restore (not measured here). The machine runs other work: single cells vary by 20-30%.
`
