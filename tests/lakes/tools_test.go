package lakes_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// pythonDuckDB runs, in the repository's virtual environment (duckdb==1.5.5 from PyPI), script
// first and then each query, and returns each query's rows as text ("a,b;c,d"), or the error
// DuckDB raised ("error: ...").
const pythonDuckDB = `
import duckdb, json, sys
con = duckdb.connect()
ext = sys.argv[3]
if ext:
    con.execute("SET extension_directory = '" + ext.replace("'", "''") + "'")
con.execute(open(sys.argv[1]).read())
out = []
for q in json.load(open(sys.argv[2])):
    try:
        rows = con.execute(q).fetchall()
        out.append(";".join(",".join(str(c) for c in r) for r in rows))
    except Exception as e:
        out.append("error: " + str(e))
print(json.dumps(out))
`

func runPythonDuckDB(t *testing.T, script string, queries ...string) []string {
	t.Helper()
	py, err := testenv.VenvBin("python")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	qs, _ := json.Marshal(queries)
	for name, body := range map[string]string{"script.sql": script, "queries.json": string(qs), "run.py": pythonDuckDB} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ext := ""
	if os.Getenv(extension.EnvDir) != "" {
		ext, _ = extension.Dir()
	}
	cmd := exec.Command(py, filepath.Join(dir, "run.py"), filepath.Join(dir, "script.sql"), filepath.Join(dir, "queries.json"), ext)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("python duckdb: %v\n%s", err, stderr)
	}
	var res []string
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python duckdb output %q: %v", out, err)
	}
	return res
}

// TestDuckDBScriptFromPython: a fork's lake namespace exists once create_fork succeeded; with
// dataenv.duckdb_script, a plain DuckDB (Python duckdb 1.5.5) reads a parent table (through the
// ancestor's alias), a deferred table (the fork's defer view), a fork-materialized table and a
// table the parent materialized after the fork (no job ran in the fork since), with the values
// dataenv.run returns; it writes its own tables into the fork, never into the parent.
func TestDuckDBScriptFromPython(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	m := e.member("prod")
	e.materialize("prod", "ducklake://main/orders", "SELECT range AS id, range * 10 AS amount FROM range(5)", "replace")
	e.materialize("prod", "ducklake://main/events", "SELECT range AS id FROM range(3)", "replace")
	if st, msg := e.requestAs(m.conn, `SELECT dataenv.create_fork('prod', 'prod/dev')`); st != "succeeded" {
		t.Fatalf("create_fork: %s %s", st, msg)
	}
	schema := names.ForkLakeSchema("prod/dev", "main")
	if !e.schemaExists(schema) {
		t.Fatalf("no fork namespace %s after create_fork", schema)
	}
	if got := e.liveViews(schema); strings.Join(got, ",") != "events,orders" {
		t.Fatalf("defer views after create_fork: %v", got)
	}
	// lake_info shows each workspace's own data path and metadata schema.
	for ws, want := range map[string]string{
		"prod":     "/lakes/main public",
		"prod/dev": "/__dataenv_forks/" + names.ForkDataSegment("prod/dev") + "/lakes/main " + schema,
	} {
		if got := queryString(t, m.conn, `SELECT data_url || ' ' || metadata_schema FROM dataenv.lake_info WHERE workspace = $1 AND name = 'main'`, ws); !strings.HasSuffix(got, want) {
			t.Errorf("lake_info of %s: %q, want ...%q", ws, got, want)
		}
	}
	e.materialize("prod/dev", "ducklake://main/daily", attachMain+"SELECT count(*) AS n FROM dl.events", "replace")
	// After the fork's last job: the parent materializes a new table.
	e.materialize("prod", "ducklake://main/late", "SELECT 42 AS answer", "replace")

	script := queryString(t, m.conn, `SELECT dataenv.duckdb_script('prod/dev')`)
	if strings.Contains(script, "{{") || strings.Contains(script, "sslrootcert") {
		t.Fatalf("script with placeholders or a sidecar file left:\n%s", script)
	}
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	printed, err := exec.Command(bin, "connect", "--dsn", pg.DSNAs(m.name, m.password, e.conn.Config().Database), "--workspace", "prod/dev").Output()
	if err != nil || string(printed) != script {
		t.Fatalf("dataenv connect --workspace prints %q (%v), duckdb_script %q", printed, err, script)
	}
	alias := names.AncestorAlias("main", "prod")
	want := []string{
		e.run("prod", attachMain+"SELECT string_agg(id || ':' || amount, ' ' ORDER BY id) FROM dl.orders").rowsText(),
		e.run("prod/dev", attachMain+"SELECT string_agg(id || ':' || amount, ' ' ORDER BY id) FROM dl.orders").rowsText(),
		e.run("prod/dev", attachMain+"SELECT n FROM dl.daily").rowsText(),
		"42",
	}
	got := runPythonDuckDB(t, script,
		`SELECT string_agg(id || ':' || amount, ' ' ORDER BY id) FROM "`+alias+`".orders`,
		`SELECT string_agg(id || ':' || amount, ' ' ORDER BY id) FROM main_lake.orders`,
		`SELECT n FROM main_lake.daily`,
		`SELECT answer FROM late`, // USE main_lake: the fork's lake is the default database
		`CREATE TABLE main_lake.outside AS SELECT 7 AS x`,
		`CREATE TABLE "`+alias+`".evil AS SELECT 1 AS x`,
	)
	for i, w := range want {
		if got[i] != w || w == "" {
			t.Errorf("query %d from Python: %q, dataenv.run: %q", i, got[i], w)
		}
	}
	if !strings.HasPrefix(got[5], "error: ") || !strings.Contains(strings.ToLower(got[5]), "read-only") {
		t.Errorf("a write into the parent's namespace from the script: %q", got[5])
	}
	if strings.HasPrefix(got[4], "error: ") {
		t.Errorf("write into the fork: %q", got[4])
	}
	if r := e.run("prod/dev", attachMain+"SELECT x FROM dl.outside").rowsText(); r != "7" {
		t.Fatalf("a job in the fork reads the table Python wrote: %q", r)
	}
	if r := e.run("prod", attachMain+"SELECT count(*) FROM duckdb_tables() WHERE table_name IN ('outside', 'evil')").rowsText(); r != "0" {
		t.Fatalf("the parent got the script's tables: %s", r)
	}
	// The table Python wrote is the fork's own (recorded when dataenv looked at the namespace:
	// the job above), and a fork of the fork defers to it.
	if got := e.forkState("prod/dev", "outside"); got != "fork-materialized" {
		t.Fatalf("fork_materialization of the table Python wrote: %q", got)
	}
	if st, msg := e.requestAs(m.conn, `SELECT dataenv.create_fork('prod/dev', 'prod/dev/sub')`); st != "succeeded" {
		t.Fatalf("create_fork of the fork: %s %s", st, msg)
	}
	if got := e.forkState("prod/dev/sub", "outside"); got != "deferred prod/dev" {
		t.Fatalf("the sub-fork's state of the table Python wrote: %q", got)
	}
	subScript := queryString(t, m.conn, `SELECT dataenv.duckdb_script('prod/dev/sub')`)
	if got := runPythonDuckDB(t, subScript, `SELECT x FROM main_lake.outside`, `SELECT answer FROM main_lake.late`); strings.Join(got, "|") != "7|42" {
		t.Fatalf("the sub-fork from Python: %v", got)
	}
	// A stranger's DuckDB gets nothing.
	if got := execErr(t, e.stranger(), `SELECT dataenv.duckdb_script('prod/dev')`); !strings.Contains(got, "may not use workspace") {
		t.Fatalf("stranger: %s", got)
	}
}

// TestDBTBuildsInAFork: dbt-duckdb (from PyPI, in the repository's virtual environment) with the
// profile `dataenv connect --dbt-profile` prints builds a model in a fork from a deferred source
// (a table of the parent the fork reads through its defer view); the model is the fork's own
// table, the parent does not get it.
func TestDBTBuildsInAFork(t *testing.T) {
	dbt, err := testenv.VenvBin("dbt")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := lakeEnv(t, storageKinds[0])
	m := e.member("prod")
	e.materialize("prod", "ducklake://main/orders", "SELECT range AS id, range * 10 AS amount FROM range(5)", "replace")
	if st, msg := e.requestAs(m.conn, `SELECT dataenv.create_fork('prod', 'prod/dev')`); st != "succeeded" {
		t.Fatalf("create_fork: %s %s", st, msg)
	}
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "connect", "--dsn", pg.DSNAs(m.name, m.password, e.conn.Config().Database), "--workspace", "prod/dev", "--dbt-profile")
	profile, err := cmd.Output()
	if err != nil {
		t.Fatalf("dataenv connect --dbt-profile: %v", err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"profiles.yml":       string(profile),
		"dbt_project.yml":    "name: fork_test\nversion: '1.0'\nconfig-version: 2\nprofile: dataenv\nmodel-paths: [models]\n",
		"models/sources.yml": "version: 2\nsources:\n  - name: lake\n    database: main_lake\n    schema: main\n    tables:\n      - name: orders\n",
		"models/revenue.sql": "{{ config(materialized='table') }}\nSELECT sum(amount) AS total, count(*) AS n FROM {{ source('lake', 'orders') }}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := exec.Command(dbt, "run", "--profiles-dir", dir, "--project-dir", dir)
	run.Dir = dir
	// Offline: no usage statistics, no version check. DuckDB finds the extensions `make deps`
	// installed under $HOME/.duckdb (or DATAENV_DUCKDB_EXTENSION_DIR's, not used by dbt here).
	run.Env = append(os.Environ(), "DBT_SEND_ANONYMOUS_USAGE_STATS=false", "DO_NOT_TRACK=1")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("dbt run: %v\n%s\nprofile:\n%s", err, out, strings.ReplaceAll(string(profile), m.password, "***"))
	}
	if got := e.run("prod/dev", attachMain+"SELECT total, n FROM dl.revenue").rowsText(); got != "100,5" {
		t.Fatalf("the model in the fork: %q", got)
	}
	if got := e.forkState("prod/dev", "revenue"); got != "fork-materialized" {
		t.Fatalf("fork_materialization of the model: %q", got)
	}
	if r := e.run("prod", attachMain+"SELECT count(*) FROM duckdb_tables() WHERE table_name = 'revenue'").rowsText(); r != "0" {
		t.Fatalf("the parent got the model: %s", r)
	}
}
