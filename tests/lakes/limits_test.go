package lakes_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// assertNoJobProcess fails when a process of a job is still alive under the sidecar (started
// with DATAENV_JOB_WARM_SPARES=0, so that no spare runner is there either).
func (e *env) assertNoJobProcess() {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(descendants(e.sidecar.Pid())) > 0 {
		if time.Now().After(deadline) {
			e.t.Fatalf("processes of a stopped job still alive: %v", descendants(e.sidecar.Pid()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantFailure(t *testing.T, what string, row interface{ failed() (bool, string) }, words ...string) {
	t.Helper()
	failed, msg := row.failed()
	if !failed {
		t.Fatalf("%s: not failed (%s)", what, msg)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Fatalf("%s: error %q does not say %q", what, msg, w)
		}
	}
}

type rowOutcome struct{ status, err string }

func (r rowOutcome) failed() (bool, string) { return r.status == "failed", r.status + ": " + r.err }

func (e *env) runOutcome(workspace, sql string) rowOutcome {
	e.t.Helper()
	row := e.runRow(workspace, sql)
	return rowOutcome{row.Status, deref(row.Error)}
}

// Limits end to end: the installation's defaults come from the sidecar's flags (here their
// environment fallbacks); set_job_limits overrides them per workspace and forks inherit; a job
// past its timeout, memory or disk limit fails with an error naming the limit, where it comes from
// and how to raise it, and leaves no process behind; the job's SQL cannot raise a limit; a request
// may ask for a shorter timeout, never a longer one.
func TestJobLimits(t *testing.T) {
	e := newEnv(t)
	url := "file://" + t.TempDir()
	mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1)`, url)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	// No spares: every process under the sidecar is then a job's.
	e.startSidecar("DATAENV_JOB_MEMORY=500MB", "DATAENV_JOB_THREADS=1", "DATAENV_JOB_WARM_SPARES=0")
	ctx := context.Background()

	r := e.run("prod", `SELECT current_setting('memory_limit'), current_setting('threads')`)
	if got := r.rowsText(); got != "476.8 MiB,1" {
		t.Fatalf("installation defaults inside the job: %s", got)
	}
	for _, st := range []string{"SET memory_limit = '100GB'", "SET threads = 16", "SET max_temp_directory_size = '1TB'"} {
		wantFailure(t, st, e.runOutcome("prod", st), "the configuration has been locked")
	}

	// Timeout: the workspace's, inherited by a fork; a request asks for less, never more.
	mustExec(t, e.conn, `SELECT dataenv.set_job_limits('prod', timeout => '2 seconds')`)
	e.workspace("prod/f", "prod")
	if got := queryString(t, e.conn, `SELECT timeout::text || ' ' || timeout_from FROM dataenv.job_limit_list WHERE workspace = 'prod/f'`); got != "00:00:02 prod" {
		t.Fatalf("the fork's inherited timeout: %s", got)
	}
	long := `SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3`
	wantFailure(t, "a long job in the fork", e.runOutcome("prod/f", long),
		"time limit", "timeout of 2s", `set on workspace "prod"`, "dataenv.set_job_limits('prod/f', timeout =>")
	e.assertNoJobProcess()
	if msg := execErr(t, e.conn, `SELECT dataenv.run('prod', 'SELECT 1', timeout => '1 hour')`); !strings.Contains(msg, "longer than the job limit") {
		t.Fatalf("a timeout past the workspace's: %s", msg)
	}
	var id uuid.UUID
	if err := e.conn.QueryRow(ctx, `SELECT dataenv.run('prod', $1, timeout => '500 ms')`, long).Scan(&id); err != nil {
		t.Fatal(err)
	}
	row := e.wait(id)
	wantFailure(t, "a job with its own timeout", rowOutcome{row.Status, deref(row.Error)}, "timeout of 500ms", "asked for by the request")
	// materialize takes the same timeout; a write stopped by it leaves nothing materialized.
	if err := e.conn.QueryRow(ctx, `SELECT dataenv.materialize('prod', 'ducklake://main/slow', $1, timeout => '500 ms')`, long).Scan(&id); err != nil {
		t.Fatal(err)
	}
	row = e.wait(id)
	wantFailure(t, "a materialize with its own timeout", rowOutcome{row.Status, deref(row.Error)}, "timeout of 500ms", "asked for by the request")
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.materializations WHERE workspace = 'prod' AND table_name = 'slow' AND status = 'materialized'`); n != "0" {
		t.Fatalf("%s materializations of the stopped write", n)
	}
	e.assertNoJobProcess()

	// Memory: DuckDB's limit (and the runner's cgroup where the machine has one).
	mustExec(t, e.conn, `SELECT dataenv.set_job_limits('prod', memory => '64MB', timeout => '10 minutes')`)
	wantFailure(t, "a job past its memory", e.runOutcome("prod", `SELECT len(list(range)) FROM range(60000000)`),
		"memory limit of 64 MB", `set on workspace "prod"`, "dataenv.set_job_limits('prod', memory =>")
	e.assertNoJobProcess()

	// Disk: bytes written into the workspace's local lake path count.
	mustExec(t, e.conn, `SELECT dataenv.set_job_limits('prod', memory => '1GB', disk => '32MB')`)
	dir := strings.TrimPrefix(url, "file://") + "/lakes/main"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wantFailure(t, "a job writing into its lake path", e.runOutcome("prod",
		attachMain+"COPY (SELECT range, repeat('x', 200) AS pad FROM range(20000000)) TO '"+dir+"/big.csv'"),
		"disk limit of 32 MB", "local lake paths", "dataenv.set_job_limits('prod', disk =>")
	e.assertNoJobProcess()
	if got := queryString(t, e.conn, `SELECT memory_bytes || ' ' || disk_bytes || ' ' || timeout FROM dataenv.job_limit_list WHERE workspace = 'prod'`); got != "1000000000 32000000 00:10:00" {
		t.Fatalf("limits after the second set_job_limits: %s", got)
	}
	mustExec(t, e.conn, `SELECT dataenv.reset_job_limits('prod')`)
	if r := e.run("prod/f", `SELECT 42`); r.rowsText() != "42" {
		t.Fatalf("a job after reset: %s", r.rowsText())
	}
}

// set_job_limits is an administrator's: anyone else is told so, bad values are refused, and
// nothing changes.
func TestSetJobLimitsRefusals(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	for _, c := range []struct{ sql, want string }{
		{`SELECT dataenv.set_job_limits('prod', memory => 'lots')`, "is not a size"},
		{`SELECT dataenv.set_job_limits('prod', memory => '1MB')`, "below 64MB"},
		{`SELECT dataenv.set_job_limits('prod', timeout => '-1 minute')`, "out of range"},
		{`SELECT dataenv.set_job_limits('prod', threads => 0)`, "between 1 and 1024"},
		{`SELECT dataenv.set_job_limits('nope', threads => 1)`, "no workspace named"},
		{`SELECT dataenv.run('prod', 'SELECT 1', timeout => '-5 s')`, "positive"},
	} {
		if msg := execErr(t, e.conn, c.sql); !strings.Contains(msg, c.want) {
			t.Fatalf("%s: %s; want %q", c.sql, msg, c.want)
		}
	}
	user := pg.NamePrefix(t) + "user"
	pg.DropRolesAtCleanup(t, user)
	mustExec(t, e.conn, `CREATE ROLE `+user+` LOGIN IN ROLE dataenv_user`)
	mustExec(t, e.conn, `SET ROLE `+user)
	msg := execErr(t, e.conn, `SELECT dataenv.set_job_limits('prod', threads => 1)`)
	mustExec(t, e.conn, `RESET ROLE`)
	if !strings.Contains(msg, "dataenv_admin") {
		t.Fatalf("a non-administrator: %s", msg)
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.job_limits`); n != "0" {
		t.Fatalf("%s job_limits rows after refusals", n)
	}
	// Every function of dataenv has a comment (this area's new ones included).
	if missing := queryString(t, e.conn, `SELECT coalesce(string_agg(p.oid::regprocedure::text, ', '), '') FROM pg_proc p
		WHERE p.pronamespace = 'dataenv'::regnamespace AND obj_description(p.oid, 'pg_proc') IS NULL`); missing != "" {
		t.Fatalf("functions without a comment: %s", missing)
	}
}

// A result past the default cap is cut with a marker that says how to get every row; the leader
// prunes finished requests past the retention (here --request-retention through its environment
// fallback) and keeps recent ones.
func TestResultCapAndRetention(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	mustExec(t, e.conn, `INSERT INTO dataenv.requests (kind, status, created_at, finished_at, error)
		VALUES ('ping', 'succeeded', now() - interval '3 days', now() - interval '3 days', 'old'),
		       ('ping', 'failed', now() - interval '1 hour', now() - interval '1 hour', 'recent')`)
	e.startSidecar("DATAENV_REQUEST_RETENTION=24h")

	row := e.runRow("prod", `SELECT range AS id, repeat('x', 100) AS pad FROM range(100000)`)
	var res struct {
		Truncated bool   `json:"truncated"`
		Note      string `json:"truncated_note"`
		RowCount  int    `json:"row_count"`
	}
	if err := json.Unmarshal(row.Result, &res); err != nil || row.Status != "succeeded" {
		t.Fatalf("run: %s %s %v", row.Status, deref(row.Error), err)
	}
	if !res.Truncated || res.RowCount == 0 || res.RowCount >= 100000 || len(row.Result) > 300<<10 ||
		!strings.Contains(res.Note, "256 KiB") || !strings.Contains(res.Note, "dataenv.materialize") {
		t.Fatalf("truncated %v, %d rows, %d bytes, note %q", res.Truncated, res.RowCount, len(row.Result), res.Note)
	}
	// What the note offers: dataenv.run's max_result_bytes raises the cap (here past the 2 MB of
	// 20000 such rows).
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.run('prod', $1, max_result_bytes => 16777216)`,
		`SELECT range AS id, repeat('x', 100) AS pad FROM range(20000)`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	row = e.wait(id)
	res.Truncated, res.RowCount = false, 0
	if err := json.Unmarshal(row.Result, &res); err != nil || row.Status != "succeeded" || res.Truncated || res.RowCount != 20000 {
		t.Fatalf("run with max_result_bytes: %s %s %v: truncated %v, %d rows", row.Status, deref(row.Error), err, res.Truncated, res.RowCount)
	}
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.run('prod', 'SELECT 1', max_result_bytes => 16777217)`).Scan(&id); err == nil ||
		!strings.Contains(err.Error(), "16 MiB") {
		t.Fatalf("max_result_bytes past the limit: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.requests WHERE error = 'old'`) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("the old finished request was not pruned")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.requests WHERE error = 'recent'`); n != "1" {
		t.Fatalf("%s recent requests left; want 1", n)
	}
}

// Warm runners by default: the sidecar keeps spares (DuckDB open, extensions loaded), and each
// job runs on one of its own (the client's tests show that a spare never takes a second job).
// Each result says where the runner's time went: a job with a lake spent some on its attach and
// on the lake's table list.
func TestJobsRunOnWarmSpares(t *testing.T) {
	e := newEnv(t)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	e.startSidecar()
	for i := 0; i < 4; i++ {
		// (A SELECT 42 may take less than the tenth of a millisecond phases are rounded to.)
		sql, timed := `SELECT 42`, []string{"sandbox"}
		if i == 3 {
			sql, timed = attachMain+sql, append(timed, "attach", "probe")
		}
		row := e.runRow("prod", sql)
		var res struct {
			Warm   bool                `json:"warm"`
			Rows   [][]json.RawMessage `json:"rows"`
			Phases map[string]string   `json:"phases"`
		}
		if err := json.Unmarshal(row.Result, &res); err != nil || row.Status != "succeeded" {
			t.Fatalf("job %d: %s %s %v", i, row.Status, deref(row.Error), err)
		}
		if i > 0 && i < 3 && !res.Warm {
			t.Fatalf("job %d did not run on a warm spare: %s", i, row.Result)
		}
		if string(res.Rows[0][0]) != "42" {
			t.Fatalf("job %d: %s", i, row.Result)
		}
		for _, p := range []string{"settings", "attach", "probe", "sandbox", "sql"} {
			if _, err := time.ParseDuration(res.Phases[p]); err != nil {
				t.Fatalf("job %d: phase %s is %q (%v); want a duration: %s", i, p, res.Phases[p], err, row.Result)
			}
		}
		for _, p := range timed {
			if d, _ := time.ParseDuration(res.Phases[p]); d <= 0 {
				t.Fatalf("job %d: phase %s took %s; want it timed: %s", i, p, res.Phases[p], row.Result)
			}
		}
	}
}

// Control-plane requests have capacity of their own: with every job slot busy and more jobs
// queued, a ping succeeds while all the jobs are still unfinished, and a queued job's steps say
// where it stands.
func TestPingDoesNotWaitForJobs(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	e.startSidecar("DATAENV_JOB_CONCURRENCY=2", "DATAENV_JOB_WARM_SPARES=0")
	ctx := context.Background()
	var jobs []uuid.UUID
	for range 6 {
		var id uuid.UUID
		if err := e.conn.QueryRow(ctx, `SELECT dataenv.run('prod', 'SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3')`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.requests WHERE kind = 'run' AND status = 'running'`) == "0" {
		if time.Now().After(deadline) {
			t.Fatal("no job started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ping uuid.UUID
	if err := e.conn.QueryRow(ctx, `SELECT dataenv.ping()`).Scan(&ping); err != nil {
		t.Fatal(err)
	}
	if row := e.wait(ping); row.Status != "succeeded" {
		t.Fatalf("ping: %s %s", row.Status, deref(row.Error))
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.requests WHERE id = ANY($1) AND status IN ('pending', 'running')`, jobs); n != "6" {
		t.Fatalf("%s of the 6 jobs unfinished when the ping was done; want 6", n)
	}
	for queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.requests WHERE id = ANY($1) AND status = 'pending' AND steps::text LIKE '%waiting jobs%'`, jobs) == "0" {
		if time.Now().After(deadline) {
			t.Fatal("no queued job says its position in its steps")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, id := range jobs {
		mustExec(t, e.conn, `SELECT dataenv.cancel($1)`, id)
	}
	for _, id := range jobs {
		if row := e.wait(id); row.Status != "cancelled" {
			t.Fatalf("job %s: %s %s", id, row.Status, deref(row.Error))
		}
	}
}

// Jailed jobs on a local lake bind its directories into the jail, so they run on spares kept for
// exactly those directories: from the third job of a workspace's lake on (a set of directories
// earns spares at its second job), each job runs on a warm spare and sees the lake as a runner
// of its own would. Another workspace's lake is another set: its first job starts a runner of its
// own.
func TestJailedJobsOnALocalLakeRunOnSpares(t *testing.T) {
	e := newEnv(t)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	for _, ws := range []string{"prod", "other"} {
		e.workspace(ws, "")
		mustExec(t, e.conn, `SELECT dataenv.add_lake($1, 'main', 'instance', $2, 'st', 'lakes/' || $1, jsonb_build_object('METADATA_SCHEMA', $1 || '_meta'))`,
			ws, e.catalog)
	}
	e.startSidecar("DATAENV_JOB_ISOLATION=jailed")
	warmRun := func(ws, sql string) (bool, string) {
		t.Helper()
		row := e.runRow(ws, sql)
		var res struct {
			jobResult
			Warm bool `json:"warm"`
		}
		if err := json.Unmarshal(row.Result, &res); err != nil || row.Status != "succeeded" {
			t.Fatalf("%s: %s %s %v", sql, row.Status, deref(row.Error), err)
		}
		return res.Warm, res.rowsText()
	}
	warmRun("prod", attachMain+"CREATE TABLE dl.t AS SELECT 7 AS x")
	warmRun("prod", attachMain+"SELECT x FROM dl.t")
	for i := 2; i < 4; i++ {
		if warm, got := warmRun("prod", attachMain+"SELECT x FROM dl.t"); !warm || got != "7" {
			t.Fatalf("job %d on the lake: warm %v, rows %s; want a warm spare reading 7", i, warm, got)
		}
	}
	if warm, got := warmRun("other", attachMain+"SELECT count(*) FROM duckdb_tables() WHERE table_name = 't'"); warm || got != "0" {
		t.Fatalf("another workspace's first job: warm %v, tables named t %s; want a runner of its own that sees none", warm, got)
	}
}
