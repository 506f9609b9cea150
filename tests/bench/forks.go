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
// 100 and 1000 tables, in every mode and method, side by side in the same run with the plain
// operation each is built on:
//
//	schema_only, parent unchanged   copy of the schema template  vs CREATE DATABASE ... TEMPLATE <that template>
//	schema_only, after a change     dump and restore             vs today's method: pg_dump --schema-only | psql -1
//	full_copy, nobody connected     TEMPLATE copy of the parent  vs CREATE DATABASE ... TEMPLATE <parent>
//	full_copy, a session connected  dump and restore             vs pg_dump -Fc | pg_restore --single-transaction
//
// Then full_copy by reflink clone on PostgreSQL 18 (forkclone.go).
//
// The parent is made as a user makes one: create_database on the "instance" cluster, objects
// created by the application role. The fork requests run on the real sidecar and are timed from
// started_at to finished_at of their rows.

func init() { Register(forkSuite{}) }

type forkSuite struct{}

func (forkSuite) Name() string { return "forks" }

// ForkRow is one parent size: the median time of each operation.
type ForkRow struct {
	Tables, Runs int
	// schema_only from the schema template, and the plain TEMPLATE copy of the template
	SchemaTemplate, TemplateOfTemplate time.Duration
	// schema_only after a schema change, today's method, and a plain pg_dump | psql
	SchemaChanged, DumpToday, DumpPlain time.Duration
	// full_copy by TEMPLATE and plain TEMPLATE; by dump (parent in use) and plain dump | restore
	FullTemplate, PlainTemplate, FullDump, PlainDumpRestore time.Duration
	// the plain TEMPLATE copy of the parent followed by the least a fork must add to it: one
	// session on the copy and its tables re-owned in one batch (the floor of the TEMPLATE ratio)
	TemplateFloor time.Duration
	// full_copy by TEMPLATE of the same schema owned by another role (every object re-owned)
	Reowned time.Duration
	// re-owning a TEMPLATE copy of the schema template: one ALTER TABLE ... OWNER per table in
	// one batch (what a fork runs), and one REASSIGN OWNED (first run only)
	AlterBatch, Reassign time.Duration
	// the copy's "done" step of the first unchanged-parent schema_only fork: where its time went
	SchemaOnlySteps string
	Methods         []string
}

func (forkSuite) Run(ctx context.Context, env *Env) (string, error) {
	start := time.Now()
	sizes, reps := []int{10, 100, 1000}, 3
	if env.Quick {
		sizes, reps = []int{10, 100}, 1
	}
	if v := env.ForkSizes; v != "" { // e.g. "1000": explore one size
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return "", fmt.Errorf("-fork-sizes: %q is not a table count", f)
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
	var clones []CloneRow
	skipped := map[string]string{}
	if env.ForkClone {
		if clones, skipped, err = CloneBench(ctx, env, fb, reps); err != nil {
			return "", err
		}
	} else {
		skipped["xfs"], skipped["btrfs"] = "left out (-fork-clone=false)", "left out (-fork-clone=false)"
	}
	var b strings.Builder
	b.WriteString(renderForks(env, rows, time.Since(start)))
	renderClone(&b, clones, skipped, reps)
	return b.String(), nil
}

// ForkBench measures fork creation for parents of each size (reps runs each, two more for small
// parents; the median kept).
func ForkBench(ctx context.Context, env *Env, fb *forkBench, sizes []int, reps int) ([]ForkRow, error) {
	var out []ForkRow
	for i, n := range sizes {
		// At 1000 tables one run's copy swings by several times the targets' margins, and a
		// median of three is what the ratios can be read from. Small parents get two runs more:
		// they are cheap, and there the plain copies (I/O) and the forks (CPU) swing apart.
		r := reps
		if n <= 100 && reps > 1 {
			r = reps + 2
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
	// lastSteps are the steps of the last timed create_fork, one a line
	lastSteps string
	dsn       func(db string) string
	appRole   string
	// libpqEnv reaches the cluster as the superuser for the plain operations
	libpqEnv []string
}

const forkControl = "bench_forks_control"

func newForkBench(ctx context.Context, env *Env) (*forkBench, error) {
	pg, err := env.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	sc, err := installedControl(ctx, env, forkControl)
	if err != nil {
		return nil, err
	}
	fb := &forkBench{benchSidecar: sc, env: env, dsn: pg.DSN,
		libpqEnv: append(os.Environ(), "PGHOST="+pg.Host(), fmt.Sprintf("PGPORT=%d", pg.Port()), "PGUSER="+pg.SuperUser,
			"PGPASSWORD="+pg.SuperPassword, "PGSSLMODE=disable")}
	if _, err := fb.handle(ctx, "setup_cluster", map[string]any{"cluster": "instance"}); err != nil {
		return nil, fmt.Errorf("setup of the instance cluster: %w", err)
	}
	if err := fb.pool.QueryRow(ctx, `SELECT app_role FROM dataenv.clusters WHERE name = 'instance'`).Scan(&fb.appRole); err != nil {
		return nil, err
	}
	return fb, nil
}

// measure builds a parent with n tables (and one owned by another role) and times each
// operation reps times.
func (fb *forkBench) measure(ctx context.Context, n, reps int, _ bool) (ForkRow, error) {
	row := ForkRow{Tables: n, Runs: reps}
	parent, other := fmt.Sprintf("bench_forks_parent_%d", n), fmt.Sprintf("bench_forks_other_%d", n)
	ws, wsOther := fmt.Sprintf("bench-%d", n), fmt.Sprintf("bench-other-%d", n)
	if err := fb.makeParent(ctx, parent, n, ""); err != nil {
		return row, err
	}
	owner := fmt.Sprintf("bench_forks_owner_%d", n)
	if err := fb.makeParent(ctx, other, n, owner); err != nil {
		return row, err
	}
	for w, db := range map[string]string{ws: parent, wsOther: other} {
		if err := fb.exec(ctx, forkControl, `SELECT dataenv.create_workspace($1)`, w); err != nil {
			return row, err
		}
		if err := fb.exec(ctx, forkControl, `SELECT dataenv.add_datatable($1, 'd', 'instance', $2)`, w, db); err != nil {
			return row, err
		}
	}
	// The first schema_only fork has no template yet: it is a dump, and its request builds one.
	if _, _, err := fb.fork(ctx, ws, ws+"-warmup", "schema_only", ""); err != nil {
		return row, err
	}
	if err := fb.waitTemplate(ctx, ws); err != nil {
		return row, err
	}
	var t timings
	for i := range reps {
		if err := fb.rep(ctx, &t, &row, i, ws, wsOther, parent); err != nil {
			return row, err
		}
	}
	row.SchemaTemplate, row.TemplateOfTemplate = medianDuration(t.so), medianDuration(t.tplOfTpl)
	row.SchemaChanged, row.DumpToday, row.DumpPlain = medianDuration(t.changed), medianDuration(t.today), medianDuration(t.plainDump)
	row.FullTemplate, row.PlainTemplate, row.TemplateFloor = medianDuration(t.fc), medianDuration(t.plainTpl), medianDuration(t.floor)
	row.FullDump, row.PlainDumpRestore, row.Reowned = medianDuration(t.fd), medianDuration(t.plainRestore), medianDuration(t.reowned)
	return row, nil
}

type timings struct {
	so, tplOfTpl, changed, today, plainDump, fc, plainTpl, floor, fd, plainRestore, reowned []time.Duration
}

// rep times every operation once, each after a CHECKPOINT.
func (fb *forkBench) rep(ctx context.Context, t *timings, row *ForkRow, i int, ws, wsOther, parent string) error {
	method := func(what, m string) {
		if i == 0 {
			row.Methods = append(row.Methods, what+" by "+m)
		}
	}
	tpl, err := fb.templateDB(ctx, ws)
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error {
			return timePlain(&t.tplOfTpl, func() (time.Duration, error) { return fb.plainTemplate(ctx, tpl) })
		},
		func() error {
			d, m, err := fb.fork(ctx, ws, fmt.Sprintf("%s-so-%d", ws, i), "schema_only", "")
			t.so = append(t.so, d)
			method("schema_only (unchanged parent)", m)
			if i == 0 {
				row.SchemaOnlySteps = forkOutline(fb.lastSteps, d) + "; its copy: " + copyDoneStep(fb.lastSteps)
			}
			if err != nil {
				return err
			}
			return fb.waitTemplate(ctx, ws) // the fork asked for the template's next spare: not timed
		},
		func() error {
			if i > 0 {
				return nil
			}
			var err error
			row.AlterBatch, row.Reassign, err = fb.reownCost(ctx, tpl, row.Tables)
			return err
		},
		func() error { // a change to the parent's schema: the next schema_only fork is restored from a dump
			if err := fb.exec(ctx, parent, `SET ROLE `+ident(fb.appRole)+`; COMMENT ON TABLE t0 IS `+quoteLit(fmt.Sprintf("revision %d", i))); err != nil {
				return err
			}
			d, m, err := fb.fork(ctx, ws, fmt.Sprintf("%s-sc-%d", ws, i), "schema_only", "")
			t.changed = append(t.changed, d)
			method("schema_only (after a schema change)", m)
			if err != nil {
				return err
			}
			return fb.waitTemplate(ctx, ws) // the rebuild runs after the fork: not timed
		},
		func() error {
			return timePlain(&t.today, func() (time.Duration, error) { return fb.todayDump(ctx, parent) })
		},
		func() error {
			return timePlain(&t.plainDump, func() (time.Duration, error) { return fb.plainDumpPsql(ctx, parent) })
		},
		func() error {
			return timePlain(&t.plainTpl, func() (time.Duration, error) { return fb.plainTemplate(ctx, parent) })
		},
		func() error {
			return timePlain(&t.floor, func() (time.Duration, error) { return fb.templateFloor(ctx, parent, row.Tables) })
		},
		func() error {
			d, m, err := fb.fork(ctx, ws, fmt.Sprintf("%s-fc-%d", ws, i), "full_copy", "")
			t.fc = append(t.fc, d)
			method("full_copy (nobody connected)", m)
			return err
		},
		func() error {
			d, m, err := fb.fork(ctx, ws, fmt.Sprintf("%s-fd-%d", ws, i), "full_copy", parent)
			t.fd = append(t.fd, d)
			method("full_copy (a session on the parent)", m)
			return err
		},
		func() error {
			return timePlain(&t.plainRestore, func() (time.Duration, error) { return fb.plainDumpRestore(ctx, parent) })
		},
		func() error {
			d, m, err := fb.fork(ctx, wsOther, fmt.Sprintf("%s-fc-%d", wsOther, i), "full_copy", "")
			t.reowned = append(t.reowned, d)
			method("full_copy of the parent owned by another role", m)
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func timePlain(into *[]time.Duration, f func() (time.Duration, error)) error {
	d, err := f()
	*into = append(*into, d)
	return err
}

// fork times one create_fork run on the sidecar (with a session held on holdDB if set), then
// drops the fork (not timed).
func (fb *forkBench) fork(ctx context.Context, parent, fork, mode, holdDB string) (time.Duration, string, error) {
	if err := fb.settle(ctx); err != nil {
		return 0, "", err
	}
	if holdDB != "" {
		held, err := pgx.Connect(ctx, fb.dsn(holdDB))
		if err != nil {
			return 0, "", err
		}
		defer held.Close(context.WithoutCancel(ctx))
	}
	res, id, err := fb.handleID(ctx, "create_fork", map[string]any{"parent": parent, "fork": fork,
		"datatables": map[string]string{"d": mode}})
	if err != nil {
		return 0, "", fmt.Errorf("create_fork %s: %w", mode, err)
	}
	var took time.Duration
	var steps string
	if err := fb.pool.QueryRow(ctx, `SELECT finished_at - started_at, (SELECT pg_catalog.string_agg(pg_catalog.format('+%s ms %s %s: %s',
			round(extract(epoch FROM (s->>'at')::timestamptz - r.started_at) * 1000), s->>'name', s->>'status', s->>'detail'), E'\n  ')
			FROM jsonb_array_elements(r.steps) s) FROM dataenv.requests r WHERE id = $1::uuid`, id).Scan(&took, &steps); err != nil {
		return 0, "", err
	}
	if fb.env.ForkSteps {
		fb.env.Progress("create_fork %s %s took %s; steps:\n  %s", mode, fork, took.Round(time.Millisecond), steps)
	}
	fb.lastSteps = steps
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

// forkOutline is where a whole create_fork's time went (took: started_at to finished_at), from its
// workspace's "created" step: checks, cleanup, copies and commit as the step says, then the
// preparation after the commit (grants and lakes) to finished_at.
func forkOutline(steps string, took time.Duration) string {
	for _, l := range strings.Split(steps, "\n") {
		l = strings.TrimSpace(l)
		head, detail, ok := strings.Cut(l, " created: fork of ")
		if !ok || !strings.Contains(head, " ms workspace ") {
			continue
		}
		var at int64
		if _, err := fmt.Sscanf(head, "+%d ms", &at); err != nil {
			return ""
		}
		parts := strings.TrimSuffix(detail[strings.LastIndex(detail, " (")+2:], ")")
		return fmt.Sprintf("the fork %s: %s, then grants and lakes prepared %s", took.Round(time.Millisecond), parts,
			(took - time.Duration(at)*time.Millisecond).Round(time.Millisecond))
	}
	return ""
}

// copyDoneStep is the detail of the copy's "done" step in steps (fork's step lines).
func copyDoneStep(steps string) string {
	for _, l := range strings.Split(steps, "\n") {
		if _, detail, ok := strings.Cut(l, " done: "); ok && strings.Contains(l, "copy datatable") {
			return strings.TrimSpace(detail)
		}
	}
	return ""
}

const (
	reownDB            = "bench_forks_reown"
	reownFrom, reownTo = "bench_forks_reown_from", "bench_forks_reown_to"
	reownRolesSQL      = `DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_forks_reown_from') THEN CREATE ROLE bench_forks_reown_from; END IF; IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_forks_reown_to') THEN CREATE ROLE bench_forks_reown_to; END IF; END $$`
)

// reownCost times, in a TEMPLATE copy of the schema template tpl (n tables), re-owning every
// table (with its indexes, TOAST table and owned sequence) from the application role to a role
// that owns nothing else, by one ALTER TABLE ... OWNER per table sent in one batch in one
// transaction (what a fork's finish runs), and then from that role to another by one REASSIGN
// OWNED in one transaction (what a fork could run instead if its template's objects belonged to
// a role of their own, owning no database). Each after a CHECKPOINT; the copy is dropped.
func (fb *forkBench) reownCost(ctx context.Context, tpl string, n int) (alter, reassign time.Duration, err error) {
	if err := fb.exec(ctx, "postgres", reownRolesSQL); err != nil {
		return 0, 0, err
	}
	_ = fb.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+reownDB)
	if err := fb.exec(ctx, "postgres", `CREATE DATABASE `+reownDB+` TEMPLATE `+ident(tpl)); err != nil {
		return 0, 0, err
	}
	defer func() { _ = fb.exec(context.WithoutCancel(ctx), "postgres", `DROP DATABASE IF EXISTS `+reownDB) }()
	// The first session of a new database builds its relation cache file: paid here, not by the
	// first timed statement.
	if err := fb.exec(ctx, reownDB, `SELECT 1`); err != nil {
		return 0, 0, err
	}
	timed := func(sql string) (time.Duration, error) {
		if err := fb.settle(ctx); err != nil {
			return 0, err
		}
		start := time.Now()
		err := fb.exec(ctx, reownDB, sql)
		return time.Since(start), err
	}
	if alter, err = timed(reownBatch(n, reownFrom)); err != nil {
		return 0, 0, err
	}
	reassign, err = timed("BEGIN; REASSIGN OWNED BY " + reownFrom + " TO " + reownTo + "; COMMIT")
	return alter, reassign, err
}

// reownBatch is one transaction giving tables t0..t<n-1> to role, one ALTER TABLE ... OWNER each.
func reownBatch(n int, role string) string {
	var b strings.Builder
	b.WriteString("BEGIN;\n")
	for i := range n {
		fmt.Fprintf(&b, "ALTER TABLE public.t%d OWNER TO %s;\n", i, role)
	}
	b.WriteString("COMMIT")
	return b.String()
}

// waitTemplate waits for the newest refresh_schema_template request of ws.
func (fb *forkBench) waitTemplate(ctx context.Context, ws string) error {
	var id, status string
	var errText *string
	if err := fb.pool.QueryRow(ctx, `SELECT id::text FROM dataenv.requests WHERE kind = 'refresh_schema_template'
		AND args->>'workspace' = $1 ORDER BY created_at DESC LIMIT 1`, ws).Scan(&id); err != nil {
		return fmt.Errorf("no schema template request for %s: %w", ws, err)
	}
	for status != "succeeded" {
		if err := fb.pool.QueryRow(ctx, `SELECT status, error FROM dataenv.wait($1::uuid, '300 s')`, id).Scan(&status, &errText); err != nil {
			return err
		}
		if status == "failed" || status == "cancelled" {
			return fmt.Errorf("refresh_schema_template %s: %s %v", id, status, errText)
		}
	}
	return nil
}

func (fb *forkBench) templateDB(ctx context.Context, ws string) (string, error) {
	var db string
	err := fb.pool.QueryRow(ctx, `SELECT database FROM dataenv.schema_templates WHERE workspace = $1 AND state = 'ready' AND spare_of IS NULL`, ws).Scan(&db)
	return db, err
}

// makeParent (re)creates database db through create_database, with n tables made by the
// application role (or by role owner, a datatable role, when set): a primary key, a unique and a
// check constraint, a secondary index and 20 rows each; vacuumed (frozen).
func (fb *forkBench) makeParent(ctx context.Context, db string, n int, owner string) error {
	_ = fb.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+ident(db)+` WITH (FORCE)`)
	_, _ = fb.pool.Exec(ctx, `DELETE FROM dataenv.managed_databases WHERE cluster = 'instance' AND name = $1`, db)
	if _, err := fb.handle(ctx, "create_database", map[string]any{"cluster": "instance", "name": db}); err != nil {
		return err
	}
	role := fb.appRole
	if owner != "" {
		_, _ = fb.handle(ctx, "create_datatable_role", map[string]any{"cluster": "instance", "role": owner})
		if err := fb.exec(ctx, db, `SET ROLE `+ident(fb.appRole)+`; GRANT CREATE ON SCHEMA public TO `+ident(owner)); err != nil {
			return err
		}
		role = owner
	}
	var ddl strings.Builder
	ddl.WriteString("SET ROLE " + ident(role) + ";\n")
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

// plainTemplate times CREATE DATABASE ... TEMPLATE src (then drops the copy).
func (fb *forkBench) plainTemplate(ctx context.Context, src string) (time.Duration, error) {
	return fb.plainCopy(ctx, "bench_forks_plain_template", "TEMPLATE "+ident(src), nil)
}

// templateFloor times CREATE DATABASE ... TEMPLATE src and the one step of a fork's finish that
// DESIGN.md requires and no fork can skip: a session on the copy and every table re-owned to
// another role, one ALTER TABLE ... OWNER each in one batch and one transaction. Nothing of
// dataenv runs: it is the least a full_copy by TEMPLATE can take (then the copy is dropped).
func (fb *forkBench) templateFloor(ctx context.Context, src string, n int) (time.Duration, error) {
	if err := fb.exec(ctx, "postgres", reownRolesSQL); err != nil {
		return 0, err
	}
	const db = "bench_forks_floor"
	_ = fb.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+db)
	if err := fb.settle(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := fb.exec(ctx, "postgres", `CREATE DATABASE `+db+` TEMPLATE `+ident(src)); err != nil {
		return 0, err
	}
	if err := fb.exec(ctx, db, reownBatch(n, reownTo)); err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, fb.exec(ctx, "postgres", `DROP DATABASE `+db)
}

// todayDump times what a schema_only fork did before schema templates: CREATE DATABASE, then
// pg_dump --schema-only --no-owner | psql --single-transaction after SET ROLE to the
// application role.
func (fb *forkBench) todayDump(ctx context.Context, parent string) (time.Duration, error) {
	return fb.plainCopy(ctx, "bench_forks_today", "OWNER "+ident(fb.appRole), func(db string) (*exec.Cmd, *exec.Cmd) {
		return exec.CommandContext(ctx, "pg_dump", "--schema-only", "--no-owner", "-d", parent),
			exec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction",
				"-c", "SET ROLE "+ident(fb.appRole), "-f", "-", "-d", db)
	})
}

// plainDumpPsql times CREATE DATABASE + pg_dump --schema-only parent | psql, a statement per
// transaction (then drops the copy).
func (fb *forkBench) plainDumpPsql(ctx context.Context, parent string) (time.Duration, error) {
	return fb.plainCopy(ctx, "bench_forks_plain_dump", "", func(db string) (*exec.Cmd, *exec.Cmd) {
		return exec.CommandContext(ctx, "pg_dump", "--schema-only", "--no-owner", "-d", parent),
			exec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db)
	})
}

// plainDumpRestore times CREATE DATABASE ... TEMPLATE template0 + pg_dump -Fc | pg_restore
// --single-transaction (then drops the copy).
func (fb *forkBench) plainDumpRestore(ctx context.Context, parent string) (time.Duration, error) {
	return fb.plainCopy(ctx, "bench_forks_plain_restore", "TEMPLATE template0", func(db string) (*exec.Cmd, *exec.Cmd) {
		return exec.CommandContext(ctx, "pg_dump", "--format=custom", "--compress=0", "--no-owner", "-d", parent),
			exec.CommandContext(ctx, "pg_restore", "--no-owner", "--single-transaction", "--exit-on-error", "-d", db)
	})
}

// plainCopy times CREATE DATABASE db <opts> and, if pipe is set, producer | consumer into it;
// then drops db.
func (fb *forkBench) plainCopy(ctx context.Context, db, opts string, pipe func(db string) (*exec.Cmd, *exec.Cmd)) (time.Duration, error) {
	_ = fb.exec(ctx, "postgres", `DROP DATABASE IF EXISTS `+db)
	if err := fb.settle(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := fb.exec(ctx, "postgres", `CREATE DATABASE `+db+` `+opts); err != nil {
		return 0, err
	}
	if pipe != nil {
		producer, consumer := pipe(db)
		producer.Env, consumer.Env = fb.libpqEnv, fb.libpqEnv
		if err := runPipe(producer, consumer); err != nil {
			return 0, err
		}
	}
	took := time.Since(start)
	return took, fb.exec(ctx, "postgres", `DROP DATABASE `+db)
}

// runPipe runs producer | consumer (superuser libpq environment: the password stays out of argv).
func runPipe(producer, consumer *exec.Cmd) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	producer.Stdout, consumer.Stdin = w, r
	var pErr, cErr strings.Builder
	producer.Stderr, consumer.Stderr = &pErr, &cErr
	if err := consumer.Start(); err != nil {
		return err
	}
	if err := producer.Start(); err != nil {
		return err
	}
	_ = w.Close()
	_ = r.Close()
	pe, ce := producer.Wait(), consumer.Wait()
	if pe != nil || ce != nil {
		return fmt.Errorf("%s | %s: %v %s / %v %s", producer.Path, consumer.Path, pe, pErr.String(), ce, cErr.String())
	}
	return nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func quoteLit(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

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

// runsOf says how many runs each size's medians are of.
func runsOf(rows []ForkRow) string {
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%d runs at %d tables", r.Runs, r.Tables))
	}
	return strings.Join(parts, ", ")
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func renderForks(env *Env, rows []ForkRow, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Fork creation: create_fork vs. the plain operations (suite `forks`)\n\n")
	w("Measured on %s; the suite took %s; each cell is the median of %s.", env.Machine(), took.Round(time.Second), runsOf(rows))
	if env.Quick {
		w(" **Quick run (-quick): not for comparison.**")
	}
	w("\n\n")
	w("Parent: N tables, each with a primary key, a unique and a check constraint, a secondary index and 20 rows, vacuumed; made by ")
	w("create_database on the instance cluster, objects created by its application role. create_fork runs on the real sidecar and ")
	w("is timed from its row's started_at to finished_at: the plan read from the parent, the lifecycle lock, the registry row, the marked ")
	w("database (staging name, comment, rename, record), the copy, the finish (owners, privileges, settings, sequences, access list) and ")
	w("the fork's workspace commit. Each timed operation starts after a CHECKPOINT. Milliseconds.\n\n")
	w("### schema_only\n\n")
	w("| tables | unchanged parent: fork | CREATE DATABASE … TEMPLATE <schema template> | ratio (target ≤ 1.5) | after a schema change: fork | the old method alone: pg_dump -s \\| psql -1 | ratio | plain pg_dump -s \\| psql | ratio (the old fork: 0.86-0.89) |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		w("| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Tables, ms(r.SchemaTemplate), ms(r.TemplateOfTemplate),
			ratio(float64(r.SchemaTemplate), float64(r.TemplateOfTemplate)), ms(r.SchemaChanged), ms(r.DumpToday),
			ratio(float64(r.SchemaChanged), float64(r.DumpToday)), ms(r.DumpPlain), ratio(float64(r.SchemaChanged), float64(r.DumpPlain)))
	}
	w("\n### full_copy\n\n")
	w("| tables | nobody connected: fork | CREATE DATABASE … TEMPLATE <parent> | ratio (target ≤ 1.1) | the same copy and its tables re-owned, nothing else | floor of the ratio | a session on the parent: fork | pg_dump -Fc \\| pg_restore -1 | ratio (target ≤ 1.1) | parent owned by another role: fork (objects re-owned) | ratio to TEMPLATE |\n")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		w("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Tables, ms(r.FullTemplate), ms(r.PlainTemplate),
			ratio(float64(r.FullTemplate), float64(r.PlainTemplate)), ms(r.TemplateFloor), ratio(float64(r.TemplateFloor), float64(r.PlainTemplate)),
			ms(r.FullDump), ms(r.PlainDumpRestore),
			ratio(float64(r.FullDump), float64(r.PlainDumpRestore)), ms(r.Reowned), ratio(float64(r.Reowned), float64(r.PlainTemplate)))
	}
	w("\nMethods used: ")
	for i, r := range rows {
		if i > 0 {
			w("; ")
		}
		w("%d tables: %s", r.Tables, strings.Join(r.Methods, ", "))
	}
	w(".\n\n")
	w("Re-owning a TEMPLATE copy of the schema template, measured in the same run (first run of each size; each after a CHECKPOINT ")
	w("and a first session on the copy, timed from connecting to the commit): one ALTER TABLE ... OWNER per table sent in one batch in one transaction, ")
	w("what a fork's finish runs, against one REASSIGN OWNED of the same objects. Milliseconds.\n\n")
	w("| tables | batch of ALTER TABLE ... OWNER | REASSIGN OWNED | ratio |\n|---:|---:|---:|---:|\n")
	for _, r := range rows {
		w("| %d | %s | %s | %s |\n", r.Tables, ms(r.AlterBatch), ms(r.Reassign), ratio(float64(r.Reassign), float64(r.AlterBatch)))
	}
	w("\nWhere the time of the first unchanged-parent schema_only fork went (its steps, as the request reports them):\n\n")
	for _, r := range rows {
		w("- %d tables: %s\n", r.Tables, r.SchemaOnlySteps)
	}
	w("\nLoad average of the machine (1 min) when the suite started and ended: %s.\n\n", env.LoadSpan())
	w("Issue 14's targets in this run: %s.\n\n", forkTargets(rows))
	w("The floor of the full_copy by TEMPLATE ratio in this run (the copy and its tables re-owned, nothing of dataenv, over the plain copy): %s.\n\n",
		templateFloors(rows))
	w("%s", forkMethod)
	return b.String()
}

// forkTargets says, per target of issue 14, at which sizes this run met it.
func forkTargets(rows []ForkRow) string {
	check := func(name string, limit float64, pair func(ForkRow) (time.Duration, time.Duration)) string {
		var met, missed []string
		for _, r := range rows {
			a, b := pair(r)
			cell := fmt.Sprintf("%d (%s)", r.Tables, ratio(float64(a), float64(b)))
			if b > 0 && float64(a)/float64(b) <= limit {
				met = append(met, cell)
			} else {
				missed = append(missed, cell)
			}
		}
		out := fmt.Sprintf("%s ≤ %.1f: ", name, limit)
		if len(met) > 0 {
			out += "met at " + strings.Join(met, ", ")
		}
		if len(missed) > 0 {
			if len(met) > 0 {
				out += "; "
			}
			out += "not met at " + strings.Join(missed, ", ")
		}
		return out + " tables"
	}
	return strings.Join([]string{
		check("schema_only of an unchanged parent / TEMPLATE copy of its template", 1.5,
			func(r ForkRow) (time.Duration, time.Duration) { return r.SchemaTemplate, r.TemplateOfTemplate }),
		check("full_copy by TEMPLATE / CREATE DATABASE ... TEMPLATE", 1.1,
			func(r ForkRow) (time.Duration, time.Duration) { return r.FullTemplate, r.PlainTemplate }),
		check("full_copy by dump / pg_dump | pg_restore", 1.1,
			func(r ForkRow) (time.Duration, time.Duration) { return r.FullDump, r.PlainDumpRestore }),
	}, "; ")
}

// templateFloors is the floor column of every size, as text.
func templateFloors(rows []ForkRow) string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s at %d tables", ratio(float64(r.TemplateFloor), float64(r.PlainTemplate)), r.Tables))
	}
	return strings.Join(out, ", ")
}

const forkMethod = `How to read it: a schema_only fork of a parent whose schema is unchanged since its schema
template was built takes the template's spare, a CREATE DATABASE ... TEMPLATE copy of the
template made in the background by the template's refresh (empty tables: such a copy costs what
the catalogs weigh, the plain column) and owned, objects and all, by a role of its own, and
renames the spare into its copy and the spare's role into the fork's workspace role in one
transaction, so that nothing is left to re-own; the suite waits for the refresh each fork asks
for, which makes the next spare (not timed), so every timed fork finds one. A fork that finds
none copies the template while it waits, which costs the plain column more (the ratios of
2026-12-05, before spares: 3.48 at 10 tables, 1.33 at 100, 3.22 at 1000), and re-owns the
copy's objects (before spares had roles, with a spare: 3.41 at 10 tables, 1.41 at 100, 1.99 at
1000, where re-owning took 258 ms of the fork's 544). On top of it comes the fork's own work:
reading the parent's plan and schema fingerprint (a digest of its catalog rows), the registry and
database records, the fork's workspace role, setting its sequences to the parent's positions,
its privileges, settings and access list, and the fork's commit. The "where the time went" lines
above are that work as the fork's own request reported it. After a schema change (here a COMMENT
ON TABLE, which changes the fingerprint) the fork is restored from a dump like before, pg_dump -Fc
| pg_restore --single-transaction as the fork's owner, and a refresh_schema_template request
rebuilds the template after the fork (not timed). "The old method alone" is what a schema_only
fork ran before schema templates (pg_dump --schema-only | psql --single-transaction), without
dataenv's bookkeeping around it, which a fork of either version adds; the old fork as a whole
measured 0.86-0.89 of the plain pg_dump | psql (an earlier run of this suite, same machine), the
last column's reference. A full_copy of a parent nobody is connected to is CREATE DATABASE ...
TEMPLATE; with a session on the parent it is a dump and restore. Every copy is owned by the fork's
own workspace role, so every TEMPLATE copy of the parent (or of the schema template, without a
spare) re-owns each object the parent's owners own (one ALTER ... OWNER per table,
view, function, type, ..., sent in one batch in the finish's transaction), and a dump is restored
connected as that role. The "parent owned by another role" column times the same for a parent
whose objects belong to a datatable role instead of the application role. The column "the same
copy and its tables re-owned, nothing else" is the plain CREATE DATABASE ... TEMPLATE followed by
the one step of a fork DESIGN.md requires that no implementation can leave out: a session on the
copy and one ALTER TABLE ... OWNER per table, in one batch and one transaction, with no request,
no catalog read, no role, no record and no commit of dataenv's around it. Its ratio to the plain
copy is a floor: a full_copy fork by TEMPLATE cannot come closer to the plain copy than that.

Re-owning costs what PostgreSQL's catalog work costs, not the statements: an ALTER TABLE ... OWNER
also changes the table's indexes, TOAST table, row type and owned sequences (7 relations a table
here), and REASSIGN OWNED does the same work object by object: it saves at most the parsing and
locking of each statement, and in the re-owning table above it is not reliably faster (in a psql
trial on a copy of the same shape, 1000 tables: ALTERs 624-941 ms, REASSIGN 559-712 ms). REASSIGN
OWNED would also hand over every database and tablespace of the role it names: forks keep the
batch of ALTERs, which names each object.

CREATE DATABASE ... TEMPLATE and the dumps write and fsync every page they copy, and on this shared
2-CPU machine their time swings with the load and with what ran just before: in psql trials on a
quiet machine (load below 1), CREATE DATABASE ... TEMPLATE of the same 1000-table schema template
took 0.46-3.3 s from one run to the next, and pg_dump -Fc -s | pg_restore -1 of it 4.4-8.5 s. The
suite times each plain copy just before the fork it is compared with and keeps the median of its
runs, but the fork's own CREATE DATABASE (its "database created" phase above) swings as much as
the plain one; dataenv's own work is the rest of the "where the time went" line (reading the
parent 0.1-0.3 s; the finish 0.4-0.7 s for a full_copy, most of it re-owning). Single cells vary by far more than
the targets' margins. Compare a fork with the plain operation of its own row, and read the load
averages above.
`
