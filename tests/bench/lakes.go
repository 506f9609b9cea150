package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/names"

	"github.com/dataenv/dataenv/tests/testenv"
)

// The lakes suite: the lake side of forks, with the real runner and DuckLake extension.
//   - Lake fork creation as the parent grows (10, 100, 1000 materialized tables): create_fork
//     (lake hook and the fork's preparation included: namespace registration, DuckLake
//     bootstrap, one defer view per table), the fork's first job and a later job. Targets:
//     create_fork at 1000 tables within 1.5x of 10, the first job within 1.2x of a later one.
//   - A read through a defer view against the same read in the parent (ratio; target ≤ 1.05).
//   - ATTACH time of one fork namespace in a catalog database holding many fork schemas, with and
//     without META_SCHEMA.
//   - drop_fork's lake cleanup throughput on the S3 server (objects/s) against a plain
//     list-and-delete of the same number of objects with minio-go.

func init() { Register(lakeSuite{}) }

type lakeSuite struct{}

func (lakeSuite) Name() string { return "lakes" }

func (lakeSuite) Run(ctx context.Context, env *Env) (string, error) {
	start := time.Now()
	lb, err := newLakeBench(ctx, env)
	if err != nil {
		return "", err
	}
	defer lb.close()
	sizes, schemas, objects, reps := []int{10, 100, 1000}, []int{0, 50, 200}, 2000, 5
	if env.Quick {
		sizes, schemas, objects, reps = []int{10, 100}, []int{0, 20}, 300, 2
	}
	var res LakeResults
	if res.Forks, err = LakeForkCreation(ctx, lb, sizes, reps); err != nil {
		return "", fmt.Errorf("fork creation: %w", err)
	}
	if res.Defer, err = DeferReadRatio(ctx, lb, 4_000_000, reps); err != nil {
		return "", fmt.Errorf("defer read: %w", err)
	}
	if res.Attach, err = AttachWithManySchemas(ctx, lb, schemas, reps); err != nil {
		return "", fmt.Errorf("attach: %w", err)
	}
	if res.Cleanup, err = CleanupThroughput(ctx, lb, objects); err != nil {
		return "", fmt.Errorf("cleanup: %w", err)
	}
	return renderLakes(env, res, reps, time.Since(start)), nil
}

// LakeResults are the lakes suite's measurements.
type LakeResults struct {
	Forks   []LakeForkRow
	Defer   DeferRow
	Attach  []AttachRow
	Cleanup CleanupRow
}

// lakeBench holds a sidecar (create_fork, drop_fork, run, materialize) on a control database of
// the bench cluster, and a runner client for the jobs timed without the sidecar.
type lakeBench struct {
	*benchSidecar
	env     *Env
	dsn     func(db string) string
	control string
	runner  *client.Client
	dir     string
	cleanup []func()
}

func newLakeBench(ctx context.Context, env *Env) (*lakeBench, error) {
	pg, err := env.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	lb := &lakeBench{env: env, dsn: pg.DSN, control: "bench_lakes_control"}
	if lb.dir, err = os.MkdirTemp("", "dataenv-bench-lakes-"); err != nil {
		return nil, err
	}
	lb.cleanup = append(lb.cleanup, func() { os.RemoveAll(lb.dir) })
	env.Progress("lakes: building dataenv-runner")
	bin, remove, err := testenv.BuildRunnerBinary(ctx)
	if err != nil {
		return nil, err
	}
	lb.cleanup = append(lb.cleanup, remove)
	if lb.runner, err = client.New(client.Config{RunnerPath: bin, Isolation: client.IsolationPlain}); err != nil {
		return nil, err
	}
	if lb.benchSidecar, err = installedControl(ctx, env, lb.control, "DATAENV_RUNNER_PATH="+bin, "DATAENV_JOB_ISOLATION=plain"); err != nil {
		return nil, err
	}
	lb.cleanup = append(lb.cleanup, lb.benchSidecar.close)
	_, err = lb.handle(ctx, "setup_cluster", map[string]any{"cluster": "instance"})
	return lb, err
}

func (lb *lakeBench) close() {
	for i := len(lb.cleanup) - 1; i >= 0; i-- {
		lb.cleanup[i]()
	}
}

// timed runs a request and returns how long it ran on the sidecar.
func (lb *lakeBench) timed(ctx context.Context, kind string, args map[string]any) (time.Duration, error) {
	_, took, err := lb.handleTimed(ctx, kind, args)
	return took, err
}

func (lb *lakeBench) sql(ctx context.Context, sql string, args ...any) error {
	_, err := lb.pool.Exec(ctx, sql, args...)
	return err
}

// rootWithLake creates workspace ws with lake main (catalog database db, data on storage st).
func (lb *lakeBench) rootWithLake(ctx context.Context, ws, db, storage string) error {
	if _, err := lb.env.CreateDatabase(ctx, db); err != nil {
		return err
	}
	if err := lb.sql(ctx, `SELECT dataenv.create_workspace($1)`, ws); err != nil {
		return err
	}
	return lb.sql(ctx, `SELECT dataenv.add_lake($1, 'main', 'instance', $2, $3, $4)`, ws, db, storage, "lakes/"+ws)
}

func (lb *lakeBench) localStorage(ctx context.Context) error {
	return lb.sql(ctx, `SELECT dataenv.add_storage('local', $1)`, "file://"+lb.dir)
}

func (lb *lakeBench) run(ctx context.Context, ws, sql string) (time.Duration, error) {
	return lb.timed(ctx, "run", map[string]any{"workspace": ws, "sql": sql})
}

const benchAttach = "ATTACH 'ducklake://main' AS dl;\n"

// LakeForkRow is one parent size.
type LakeForkRow struct {
	Tables                        int
	CreateFork, FirstJob, NextJob time.Duration
	ParentJob                     time.Duration
}

// LakeForkCreation measures, for parents with each number of materialized tables, create_fork,
// the fork's first job and a later job (medians of reps, the first job once per fork), against
// the same trivial job in the parent.
func LakeForkCreation(ctx context.Context, lb *lakeBench, sizes []int, reps int) ([]LakeForkRow, error) {
	if err := lb.localStorage(ctx); err != nil {
		return nil, err
	}
	var out []LakeForkRow
	for _, n := range sizes {
		lb.env.Progress("lakes: parent with %d materialized tables", n)
		ws := fmt.Sprintf("lk-%d", n)
		if err := lb.parentWithTables(ctx, ws, n); err != nil {
			return nil, err
		}
		row := LakeForkRow{Tables: n}
		var create, first, next, parent []time.Duration
		for i := range reps {
			fork := fmt.Sprintf("%s-f%d", ws, i)
			d, err := lb.timed(ctx, "create_fork", map[string]any{"parent": ws, "fork": fork})
			if err != nil {
				return nil, err
			}
			create = append(create, d)
			if d, err = lb.run(ctx, fork, benchAttach+"SELECT 1"); err != nil {
				return nil, err
			}
			first = append(first, d)
			if d, err = lb.run(ctx, fork, benchAttach+"SELECT 1"); err != nil {
				return nil, err
			}
			next = append(next, d)
			if d, err = lb.run(ctx, ws, benchAttach+"SELECT 1"); err != nil {
				return nil, err
			}
			parent = append(parent, d)
		}
		row.CreateFork, row.FirstJob, row.NextJob, row.ParentJob = medianDuration(create), medianDuration(first), medianDuration(next), medianDuration(parent)
		out = append(out, row)
	}
	return out, nil
}

// parentWithTables makes workspace ws with n tables in its lake, each recorded as materialized.
func (lb *lakeBench) parentWithTables(ctx context.Context, ws string, n int) error {
	if err := lb.rootWithLake(ctx, ws, "bench_lakes_"+strings.ReplaceAll(ws, "-", "_"), "local"); err != nil {
		return err
	}
	for done := 0; done < n; done += 200 {
		var b strings.Builder
		b.WriteString(benchAttach + "BEGIN;\n")
		for i := done; i < min(n, done+200); i++ {
			fmt.Fprintf(&b, "CREATE TABLE dl.t%04d AS SELECT range AS id FROM range(10);\n", i)
		}
		b.WriteString("COMMIT;\nSELECT 1")
		if _, err := lb.run(ctx, ws, b.String()); err != nil {
			return err
		}
	}
	return lb.sql(ctx, `INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, row_count, request_id)
		SELECT $1, 'main', format('t%s', lpad(i::text, 4, '0')), 'materialized', 'replace', 10, gen_random_uuid()
		  FROM generate_series(0, $2 - 1) i`, ws, n)
}

// DeferRow compares a read through a defer view with the same read in the parent.
type DeferRow struct {
	Rows                         int
	Direct, Deferred             time.Duration
	DirectBaseline, DeferredBase time.Duration
}

// DeferReadRatio times the same aggregate over a parent table read directly in the parent and
// through the fork's defer view, and the same jobs with SELECT 1 (attach cost) to net it out.
func DeferReadRatio(ctx context.Context, lb *lakeBench, rows, reps int) (DeferRow, error) {
	lb.env.Progress("lakes: defer read against direct read (%d rows)", rows)
	row := DeferRow{Rows: rows}
	if err := lb.rootWithLake(ctx, "lk-read", "bench_lakes_read", "local"); err != nil {
		return row, err
	}
	_, err := lb.timed(ctx, "materialize", map[string]any{"workspace": "lk-read", "target": "ducklake://main/orders",
		"query": fmt.Sprintf("SELECT range AS id, (range * 7919) %% 100003 AS amount, 'customer ' || (range %% 5000) AS customer FROM range(%d)", rows)})
	if err != nil {
		return row, err
	}
	if _, err := lb.timed(ctx, "create_fork", map[string]any{"parent": "lk-read", "fork": "lk-read-f"}); err != nil {
		return row, err
	}
	query := benchAttach + "SELECT customer, sum(amount), count(*) FROM dl.orders GROUP BY customer ORDER BY 2 DESC LIMIT 5"
	if _, err := lb.run(ctx, "lk-read-f", query); err != nil { // creates the view; not timed
		return row, err
	}
	var direct, deferred, db, fb []time.Duration
	for range reps {
		for _, m := range []struct {
			ws, sql string
			into    *[]time.Duration
		}{{"lk-read", query, &direct}, {"lk-read-f", query, &deferred}, {"lk-read", benchAttach + "SELECT 1", &db}, {"lk-read-f", benchAttach + "SELECT 1", &fb}} {
			d, err := lb.run(ctx, m.ws, m.sql)
			if err != nil {
				return row, err
			}
			*m.into = append(*m.into, d)
		}
	}
	row.Direct, row.Deferred, row.DirectBaseline, row.DeferredBase = medianDuration(direct), medianDuration(deferred), medianDuration(db), medianDuration(fb)
	return row, nil
}

// AttachRow is the ATTACH time of one namespace with schemas fork schemas in the same database.
type AttachRow struct {
	Schemas                     int
	WithMetaSchema, WithoutMeta time.Duration
	BaselineJob                 time.Duration
}

// AttachWithManySchemas adds fork namespaces to one catalog database and times a job that
// attaches one of them (and reads a table), with and without META_SCHEMA, against a job that
// attaches nothing.
func AttachWithManySchemas(ctx context.Context, lb *lakeBench, counts []int, reps int) ([]AttachRow, error) {
	db := "bench_lakes_attach"
	if _, err := lb.env.CreateDatabase(ctx, db); err != nil {
		return nil, err
	}
	dsn := lb.dsn(db)
	attach := func(alias, schema string, meta bool) string {
		opts := fmt.Sprintf("METADATA_SCHEMA %s, DATA_PATH %s", literal(schema), literal(lb.dir+"/attach/"+schema+"/"))
		if meta {
			opts += ", META_SCHEMA " + literal(schema)
		}
		return fmt.Sprintf("ATTACH %s AS %s (%s)", literal("ducklake:postgres:"+dsn), alias, opts)
	}
	run := func(blocks ...string) (time.Duration, error) {
		start := time.Now()
		_, err := lb.runner.Run(ctx, client.Job{Blocks: blocks, CollectLastOnly: true})
		return time.Since(start), err
	}
	if _, err := run(attach("target", "dataenv_fork_target", true), "CREATE TABLE target.t AS SELECT 1 AS x"); err != nil {
		return nil, err
	}
	var out []AttachRow
	have := 0
	for _, n := range counts {
		lb.env.Progress("lakes: attach with %d other fork schemas", n)
		for have < n {
			var blocks []string
			for i := have; i < min(n, have+25); i++ {
				s := fmt.Sprintf("dataenv_fork_other_%04d", i)
				blocks = append(blocks, attach(fmt.Sprintf("o%d", i), s, true)+";\nCREATE TABLE "+fmt.Sprintf("o%d", i)+".t AS SELECT 1 AS x")
			}
			if _, err := run(blocks...); err != nil {
				return nil, err
			}
			have = min(n, have+25)
		}
		row := AttachRow{Schemas: n}
		var with, without, base []time.Duration
		for range reps {
			d, err := run(attach("target", "dataenv_fork_target", true), "SELECT count(*) FROM target.t")
			if err != nil {
				return nil, err
			}
			with = append(with, d)
			if d, err = run(attach("target", "dataenv_fork_target", false), "SELECT count(*) FROM target.t"); err != nil {
				return nil, err
			}
			without = append(without, d)
			if d, err = run("LOAD ducklake; LOAD postgres_scanner", "SELECT 1"); err != nil {
				return nil, err
			}
			base = append(base, d)
		}
		row.WithMetaSchema, row.WithoutMeta, row.BaselineJob = medianDuration(with), medianDuration(without), medianDuration(base)
		out = append(out, row)
	}
	return out, nil
}

// CleanupRow is drop_fork's lake cleanup of a fork prefix holding Objects objects on S3.
type CleanupRow struct {
	Objects          int
	DropFork, Direct time.Duration
}

// CleanupThroughput fills a fork's data prefix on the S3 server and times drop_fork (in-process:
// the workspace, then the lake cleanup: schema drop, prefix delete, registry row), against a
// plain minio-go list and delete of as many objects.
func CleanupThroughput(ctx context.Context, lb *lakeBench, objects int) (CleanupRow, error) {
	row := CleanupRow{Objects: objects}
	lb.env.Progress("lakes: starting the S3 server")
	s3, err := testenv.StartS3(ctx)
	if err != nil {
		return row, err
	}
	lb.cleanup = append(lb.cleanup, func() { s3.Stop(context.Background()) })
	bucket := "bench-lakes"
	mc := s3.Client()
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: s3.Region}); err != nil {
		return row, err
	}
	creds := fmt.Sprintf(`{"endpoint": "http://%s", "region": %q, "access_key_id": %q, "secret_access_key": %q}`, s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey)
	if err := lb.sql(ctx, `SELECT dataenv.add_storage('s3', $1, $2::jsonb)`, "s3://"+bucket, creds); err != nil {
		return row, err
	}
	if err := lb.rootWithLake(ctx, "lk-clean", "bench_lakes_clean", "s3"); err != nil {
		return row, err
	}
	if _, err := lb.timed(ctx, "create_fork", map[string]any{"parent": "lk-clean", "fork": "lk-clean-f"}); err != nil {
		return row, err
	}
	if _, err := lb.run(ctx, "lk-clean-f", benchAttach+"CREATE TABLE dl.t AS SELECT range AS id FROM range(10000)"); err != nil {
		return row, err
	}
	lb.env.Progress("lakes: uploading %d objects twice", objects)
	prefix := names.ForkLakeDataPrefix("lk-clean-f", "lakes/lk-clean")
	if err := putObjects(ctx, mc, bucket, prefix+"filler/", objects); err != nil {
		return row, err
	}
	if err := putObjects(ctx, mc, bucket, "baseline/", objects); err != nil {
		return row, err
	}
	if row.DropFork, err = lb.timed(ctx, "drop_fork", map[string]any{"fork": "lk-clean-f"}); err != nil {
		return row, err
	}
	start := time.Now()
	ch := mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "baseline/", Recursive: true})
	for e := range mc.RemoveObjects(ctx, bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			return row, e.Err
		}
	}
	row.Direct = time.Since(start)
	return row, nil
}

func putObjects(ctx context.Context, mc *minio.Client, bucket, prefix string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				body := []byte(fmt.Sprintf("object %d", i))
				if _, err := mc.PutObject(ctx, bucket, fmt.Sprintf("%s%06d", prefix, i), bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func renderLakes(env *Env, r LakeResults, reps int, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Lakes: fork namespaces, defer reads, attach, cleanup (suite `lakes`)\n\n")
	w("Measured on %s; the suite took %s; median of %d run(s) per cell unless said otherwise.", env.Machine(), took.Round(time.Second), reps)
	if env.Quick {
		w(" **Quick run (-quick): not for comparison.**")
	}
	w("\n\nEvery job is a real dataenv-runner process (plain isolation) with the DuckLake extension; the catalog is a database of the bench cluster; data on a local directory except for the cleanup. Milliseconds.\n\n")
	w("### Lake fork creation as the parent grows\n\n")
	w("create_fork is the request's run on the sidecar: the workspace row, the lake hook that stamps the fork's lakes, and (issue 15) the fork's preparation for its members' tools: a job that registers each lake namespace, creates the marked schema, lets DuckLake bootstrap it and creates one defer view per parent table, and saves the DuckDB script. The fork's first job then only attaches, like a later one. Targets: create_fork at 1000 tables within 1.5× of 10 tables; the first job within 1.2× of a later one.\n\n")
	w("| parent tables | create_fork | create_fork / first size | fork's first job | fork's later job | first / later | same job in the parent | later / parent |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range r.Forks {
		w("| %d | %s | %s | %s | %s | %s | %s | %s |\n", f.Tables, ms(f.CreateFork), ratio(float64(f.CreateFork), float64(r.Forks[0].CreateFork)),
			ms(f.FirstJob), ms(f.NextJob), ratio(float64(f.FirstJob), float64(f.NextJob)), ms(f.ParentJob), ratio(float64(f.NextJob), float64(f.ParentJob)))
	}
	d := r.Defer
	w("\n### Defer read against direct read\n\n")
	w("GROUP BY over a %d-row parent table, read in the parent and through the fork's defer view (the fork job also attaches the parent READ_ONLY). Net = job minus the same job with SELECT 1.\n\n", d.Rows)
	w("| | parent (direct) | fork (defer view) | ratio |\n|---|---:|---:|---:|\n")
	w("| whole job | %s | %s | %s |\n", ms(d.Direct), ms(d.Deferred), ratio(float64(d.Deferred), float64(d.Direct)))
	w("| attach only (SELECT 1) | %s | %s | %s |\n", ms(d.DirectBaseline), ms(d.DeferredBase), ratio(float64(d.DeferredBase), float64(d.DirectBaseline)))
	w("| net read | %s | %s | %s |\n", ms(d.Direct-d.DirectBaseline), ms(d.Deferred-d.DeferredBase), ratio(float64(d.Deferred-d.DeferredBase), float64(d.Direct-d.DirectBaseline)))
	w("\n### ATTACH with many fork schemas in one catalog database\n\n")
	w("A job that attaches one fork namespace and counts a table, with N other DuckLake namespaces in the same database; baseline: a job that only loads the extensions.\n\n")
	w("| other schemas | with META_SCHEMA | without META_SCHEMA | without / with | baseline job |\n|---:|---:|---:|---:|---:|\n")
	for _, a := range r.Attach {
		w("| %d | %s | %s | %s | %s |\n", a.Schemas, ms(a.WithMetaSchema), ms(a.WithoutMeta), ratio(float64(a.WithoutMeta), float64(a.WithMetaSchema)), ms(a.BaselineJob))
	}
	c := r.Cleanup
	w("\n### drop_fork cleanup on the S3 server\n\n")
	w("| objects | drop_fork (in-process, once) | objects/s | minio-go list + delete | objects/s | ratio |\n|---:|---:|---:|---:|---:|---:|\n")
	w("| %d | %s | %.0f | %s | %.0f | %s |\n\n", c.Objects, ms(c.DropFork), float64(c.Objects)/c.DropFork.Seconds(), ms(c.Direct),
		float64(c.Objects)/c.Direct.Seconds(), ratio(float64(c.DropFork), float64(c.Direct)))
	return b.String()
}

// literal quotes s as a SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
