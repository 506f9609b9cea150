package lakes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// storageKind sets up a storage for a test: a local directory or a bucket of the S3 server.
type storageKind struct {
	name  string
	setup func(t *testing.T, e *env) (url string)
}

var storageKinds = []storageKind{
	{"local", func(t *testing.T, e *env) string {
		url := "file://" + t.TempDir()
		mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1)`, url)
		return url
	}},
	{"s3", func(t *testing.T, e *env) string {
		url := "s3://" + s3.Bucket(t)
		creds := fmt.Sprintf(`{"endpoint": "http://%s", "region": %q, "access_key_id": %q, "secret_access_key": %q}`,
			s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey)
		mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1, $2::jsonb)`, url, creds)
		return url
	}},
}

// lakeEnv is an env with a root workspace "prod" that has lake "main" on the given storage.
func lakeEnv(t *testing.T, sk storageKind, sidecarEnv ...string) (*env, string) {
	e := newEnv(t)
	url := sk.setup(t, e)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	e.startSidecar(sidecarEnv...)
	return e, url
}

const attachMain = "ATTACH 'ducklake://main' AS dl;\n"

// run and materialize in a root workspace, on a local data path and on the S3 server.
func TestRootRunAndMaterialize(t *testing.T) {
	for _, sk := range storageKinds {
		t.Run(sk.name, func(t *testing.T) {
			e, url := lakeEnv(t, sk)
			e.run("prod", attachMain+"CREATE TABLE dl.raw AS SELECT range AS id, 'item ' || range AS name FROM range(5000)")
			checkParquetUnder(t, e, url, "lakes/main/")
			m := e.materialize("prod", "ducklake://main/orders", attachMain+"SELECT id, name, id * 2 AS amount FROM dl.raw WHERE id < 5", "replace")
			if m["row_count"] != float64(5) || m["snapshot_id"] == nil || m["status"] != "materialized" {
				t.Fatalf("materialize result %v", m)
			}
			if ph, _ := m["phases"].(map[string]any); ph == nil || ph["attach"] == nil || ph["sql"] == nil || ph["attach"] == "0s" {
				t.Fatalf("materialize result %v: want the job's phases, its attach timed", m)
			}
			// Without an ATTACH of its own, the query reads the target through __dataenv_target.
			m = e.materialize("prod", "ducklake://main/orders", "SELECT 100 AS id, 'x' AS name, 7 AS amount", "append")
			if m["row_count"] != float64(1) || m["total_rows"] != float64(6) {
				t.Fatalf("append result %v", m)
			}
			r := e.run("prod", attachMain+"SELECT name, amount, id FROM dl.orders ORDER BY id")
			if got := r.rowsText(); got != "item 0,0,0;item 1,2,1;item 2,4,2;item 3,6,3;item 4,8,4;x,7,100" {
				t.Fatalf("rows %s", got)
			}
			if cols := fmt.Sprint(r.Columns[0].Name, r.Columns[1].Name, r.Columns[2].Name); cols != "nameamountid" {
				t.Fatalf("column order %s", cols)
			}
			if got := queryString(t, e.conn, `SELECT status || ' ' || row_count || ' ' || strategy FROM dataenv.materialization_list WHERE workspace = 'prod' AND table_name = 'orders'`); got != "materialized 1 append" {
				t.Fatalf("materialization_list: %s", got)
			}
			if strings.Contains(string(e.runRow("prod", attachMain+"SELECT * FROM duckdb_databases()").Result), pg.SuperPassword) {
				t.Fatal("a result shows the catalog password")
			}
		})
	}
}

// checkParquetUnder checks that the lake wrote parquet files under prefix of the storage.
func checkParquetUnder(t *testing.T, e *env, url, prefix string) {
	t.Helper()
	keys := listKeys(t, url, prefix)
	n := 0
	for _, k := range keys {
		if strings.HasSuffix(k, ".parquet") {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no parquet file under %s/%s: %v", url, prefix, keys)
	}
}

// listKeys lists the object keys under prefix with an independent client.
func listKeys(t *testing.T, url, prefix string) []string {
	t.Helper()
	var out []string
	if dir, ok := strings.CutPrefix(url, "file://"); ok {
		filepath.Walk(filepath.Join(dir, prefix), func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				out = append(out, filepath.ToSlash(rel))
			}
			return nil
		})
		return out
	}
	bucket := strings.TrimPrefix(url, "s3://")
	for o := range s3.Client().ListObjects(context.Background(), bucket, minioListOpts(prefix)) {
		if o.Err != nil {
			t.Fatalf("list %s/%s: %v", url, prefix, o.Err)
		}
		out = append(out, o.Key)
	}
	return out
}

// Unknown lake, unknown datatable and SQL errors fail with errors naming what is wrong.
func TestJobErrors(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	for sql, want := range map[string]string{
		"ATTACH 'ducklake://nope' AS x; SELECT 1":     `workspace "prod" has no lake named "nope"`,
		"ATTACH 'datatable://nope' AS x; SELECT 1":    `workspace "prod" has no datatable named "nope"`,
		"SELECT * FROM no_such_table":                 "no_such_table",
		attachMain + "SELECT * FROM dl.no_such_table": "no_such_table",
		"ATTACH 'ducklake://main'; SELECT 1":          "needs an alias",
	} {
		row := e.runRow("prod", sql)
		if row.Status != "failed" || !strings.Contains(deref(row.Error), want) {
			t.Errorf("%s: %s %s; want an error with %q", sql, row.Status, deref(row.Error), want)
		}
		if row.Error != nil && strings.Contains(*row.Error, pg.SuperPassword) {
			t.Errorf("%s: the error shows the catalog password", sql)
		}
	}
	row := e.materializeRow("prod", "ducklake://main/t", "CREATE TABLE x (a int)", "replace")
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "last statement of query must be the query") {
		t.Errorf("materialize of a DDL: %s %s", row.Status, deref(row.Error))
	}
	row = e.materializeRow("prod", "ducklake://main/t", "SELECT * FROM missing_table", "replace")
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "missing_table") {
		t.Errorf("materialize of a bad query: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT status FROM dataenv.materialization_list WHERE table_name = 't'`); got != "failed" {
		t.Errorf("failed materialization recorded as %s", got)
	}
}

// ATTACH 'datatable://<name>' reaches the workspace's datatable database; in a fork that keeps
// the original, the parent's.
func TestDatatableAttach(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	app := e.setupInstance()
	db := pg.CreateDatabase(t)
	// A datatable gives the workspace role what the cluster's application role may do there.
	mustExec(t, pg.Connect(t, db), `CREATE TABLE customers (id int PRIMARY KEY, name text); INSERT INTO customers VALUES (1, 'ada'), (2, 'bob');
		GRANT SELECT ON customers TO `+pgx.Identifier{app}.Sanitize())
	mustExec(t, e.conn, `SELECT dataenv.add_datatable('prod', 'crm', 'instance', $1)`, db)
	e.run("prod", attachMain+"CREATE TABLE dl.orders AS SELECT 1 AS customer_id, 10 AS amount UNION ALL SELECT 2, 5")
	const q = "ATTACH 'datatable://crm' AS crm (READ_ONLY);\n" + attachMain +
		"SELECT c.name, o.amount FROM dl.orders o JOIN crm.public.customers c ON c.id = o.customer_id ORDER BY 1"
	if got := e.run("prod", q).rowsText(); got != "ada,10;bob,5" {
		t.Fatalf("join of a lake and a datatable: %s", got)
	}
	e.workspace("dev", "prod")
	if got := e.run("dev", "ATTACH 'datatable://crm' AS crm; SELECT count(*) FROM crm.public.customers").rowsText(); got != "2" {
		t.Fatalf("keep_original datatable in a fork: %s", got)
	}
}

// A sidecar killed after the lake write and before the record: the restarted sidecar finishes
// the request once (an append is not repeated: the write's snapshot carries the request id),
// with one materialization row.
func TestMaterializeKilledAfterWrite(t *testing.T) {
	e := newEnv(t)
	storageKinds[0].setup(t, e)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	e.startSidecar("DATAENV_CRASH_AT=job.materialize.after_write", "DATAENV_CRASH_MARKER_DIR="+t.TempDir())
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.materialize('prod', 'ducklake://main/t', 'SELECT range AS x FROM range(7)', 'append')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := e.sidecar.WaitExit(60 * time.Second); err != nil {
		t.Fatalf("the sidecar did not die at the crash point: %v", err)
	}
	e.startSidecar()
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("materialize after the restart: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text || ' ' || max(row_count) FROM dataenv.materializations WHERE request_id = $1`, id); got != "1 7" {
		t.Fatalf("materialization rows: %s", got)
	}
	if got := e.run("prod", attachMain+"SELECT count(*) FROM dl.t").rowsText(); got != "7" {
		t.Fatalf("table rows: %s", got)
	}
}

// A materialize whose job fails with a final error after its write committed (a later block, or
// the COMMIT's answer lost) is not recorded as failed: the next attempt finds the write's tagged
// snapshot and records it, and the append is not repeated.
func TestMaterializeFailingAfterItsCommitIsNotRecordedFailed(t *testing.T) {
	e := newEnv(t)
	storageKinds[0].setup(t, e)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	e.startSidecar("DATAENV_CRASH_AT=job.materialize.fail_after_commit", "DATAENV_CRASH_MARKER_DIR="+t.TempDir())
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.materialize('prod', 'ducklake://main/t', 'SELECT range AS x FROM range(7)', 'append')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("materialize: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text || ' ' || max(status) || ' ' || max(row_count) FROM dataenv.materializations WHERE request_id = $1`, id); got != "1 materialized 7" {
		t.Fatalf("materialization rows: %s", got)
	}
	if got := queryString(t, e.conn, `SELECT attempts::text FROM dataenv.requests WHERE id = $1`, id); got == "1" {
		t.Fatal("the failure after the commit was not retried")
	}
	if got := e.run("prod", attachMain+"SELECT count(*) FROM dl.t").rowsText(); got != "7" {
		t.Fatalf("table rows: %s", got)
	}
}

// A drop_fork whose workspace role drop hits a transient fault is retried, and the retry (the
// workspace row already gone, nothing else left) drops the role instead of reporting the fork
// dropped with its role left behind.
func TestDropForkRetriedAfterARoleDropFault(t *testing.T) {
	e := newEnv(t)
	storageKinds[0].setup(t, e)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	e.startSidecar("DATAENV_CRASH_AT=cluster.workspace_role.fail_drop", "DATAENV_CRASH_MARKER_DIR="+t.TempDir())
	e.workspace("dev", "prod")
	e.run("dev", attachMain+"SELECT 1") // the job makes the fork's workspace role
	role := queryString(t, e.conn, `SELECT coalesce(string_agg(role, ','), '') FROM dataenv.workspace_roles WHERE workspace = 'dev'`)
	if role == "" {
		t.Fatal("the fork has no workspace role to drop")
	}
	row := e.dropFork("dev")
	if row.Status != "succeeded" {
		t.Fatalf("drop_fork: %s %s", row.Status, deref(row.Error))
	}
	if row.Attempts < 2 {
		t.Fatalf("attempts %d: the injected fault did not strike", row.Attempts)
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.workspace_roles WHERE workspace = 'dev'`); n != "0" {
		t.Fatalf("%s workspace role records remain", n)
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM pg_roles WHERE rolname = $1`, role); n != "0" {
		t.Fatalf("role %s remains on the cluster", role)
	}
}

// A table a root workspace gets without a materialize (a run job's own CREATE TABLE, as a
// member's DuckDB session would make one) is recorded by the next job that attaches the lake,
// before its outcome (a run job lists the tables on its own catalog session, before its own SQL
// runs, and they are recorded once it is done).
func TestRunRecordsTablesMadeOutsideMaterialize(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.run("prod", attachMain+"CREATE TABLE dl.made AS SELECT 1 AS x, 'a' AS b; CREATE TABLE dl.other AS SELECT 2.5 AS y")
	if r := e.run("prod", attachMain+"SELECT x FROM dl.made").rowsText(); r != "1" {
		t.Fatalf("the table made by a run: %q", r)
	}
	got := queryString(t, e.conn, `SELECT coalesce(string_agg(table_name || ' ' || source || ' ' || status || ' ' ||
			(SELECT string_agg(c->>'name' || ':' || (c->>'type'), ',' ORDER BY o) FROM jsonb_array_elements(columns) WITH ORDINALITY AS x(c, o)),
			'; ' ORDER BY table_name), 'none')
		FROM dataenv.materializations WHERE workspace = 'prod' AND table_name IN ('made', 'other')`)
	if want := "made outside materialized x:int32,b:varchar; other outside materialized y:decimal(2,1)"; got != want {
		t.Fatalf("records of the tables made by a run, once the next run is done: %s; want %s", got, want)
	}
}

// A materialization's SQL runs before dataenv's own statements on the same DuckDB connection:
// macros it makes under the names of the functions those statements call (max,
// ducklake_snapshots) do not change what is recorded.
func TestMaterializeRecordIsNotForgedByTheJobsMacros(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	forge := attachMain + "CREATE MACRO max(x) AS 999999;\n" +
		"CREATE TEMP MACRO ducklake_snapshots(c) AS TABLE SELECT 888888 AS snapshot_id;\n"
	m := e.materialize("prod", "ducklake://main/t", forge+"SELECT range AS id FROM range(3)", "replace")
	snap, ok := m["snapshot_id"].(float64)
	if !ok || snap >= 888888 || m["row_count"] != float64(3) {
		t.Fatalf("materialize result %v: the job's macros were read as the snapshot", m)
	}
	real := queryString(t, e.conn, `SELECT snapshot_id::text FROM dataenv.materialization_list WHERE workspace = 'prod' AND table_name = 't'`)
	if real != fmt.Sprint(int64(snap)) {
		t.Fatalf("recorded snapshot %s, result's %v", real, snap)
	}
}

// A passing fault while a fork's job reads its parent's lake catalog (a lost connection, a
// sidecar that lost its leadership while it fenced) retries the job: it does not run without
// the parent's attach, which the fork's defer views read.
func TestForkJobRetriedAfterAFaultReadingItsParentsCatalog(t *testing.T) {
	markers := t.TempDir()
	marker := filepath.Join(markers, "lake.ancestor_catalog.fail_once")
	if err := os.WriteFile(marker, nil, 0o600); err != nil { // disarmed until the job below
		t.Fatal(err)
	}
	e, _ := lakeEnv(t, storageKinds[0], "DATAENV_CRASH_AT=lake.ancestor_catalog.fail_once", "DATAENV_CRASH_MARKER_DIR="+markers)
	e.materialize("prod", "ducklake://main/orders", "SELECT range AS id FROM range(3)", "replace")
	e.workspace("dev", "prod")
	if r := e.run("dev", attachMain+"SELECT count(*) FROM dl.orders").rowsText(); r != "3" {
		t.Fatalf("the fork's deferred read: %q", r)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	row := e.runRow("dev", attachMain+"SELECT count(*) FROM dl.orders")
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the injected fault did not strike: %v", err)
	}
	if row.Status != "succeeded" || row.Attempts < 2 {
		t.Fatalf("the fork's job after a fault reading its parent's catalog: %s (attempt %d): %v", row.Status, row.Attempts, deref(row.Error))
	}
	var r jobResult
	if err := json.Unmarshal(row.Result, &r); err != nil || r.rowsText() != "3" {
		t.Fatalf("result %s (%v): want 3 rows deferred to the parent", row.Result, err)
	}
}
