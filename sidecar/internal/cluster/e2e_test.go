package cluster_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

// End-to-end: SQL -> the real dataenv binary (tests/sidecartest builds it with the test hooks)
// -> wait().

type sidecarProc struct{ *sidecartest.Process }

func (f *fixture) startSidecar(env ...string) sidecarProc {
	f.t.Helper()
	return sidecarProc{sidecartest.Start(f.t, sidecartest.Options{DSN: f.controlDSN, Env: env})}
}

// waitRow calls dataenv.wait and returns status, error text and result.
func (f *fixture) waitRow(id string) (status, errText string, result map[string]any) {
	f.t.Helper()
	var res []byte
	var e *string
	err := f.sql.QueryRow(f.ctx, `SELECT status, error, result FROM dataenv.wait($1::uuid, '90 s')`, id).Scan(&status, &e, &res)
	if err != nil {
		f.t.Fatalf("wait %s: %v", id, err)
	}
	if e != nil {
		errText = *e
	}
	_ = json.Unmarshal(res, &result)
	return status, errText, result
}

func TestEndToEndSIGKILLBetweenCreateAndRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ext := f.ext()
	first := f.startSidecar("DATAENV_CRASH_AT=" + cluster.CrashAfterCreateDatabase)
	id := queryString(t, f.sql, `SELECT dataenv.setup_cluster($1)::text`, f.name)
	if st, e, _ := f.waitRow(id); st != "succeeded" {
		t.Fatalf("setup through the sidecar: %s %s", st, e)
	}
	db := f.prefix + "crash"
	id = queryString(t, f.sql, `SELECT dataenv.create_database($1, $2)::text`, f.name, db)
	if err := first.WaitExit(90 * time.Second); err != nil {
		t.Fatal("the sidecar did not die at the crash point")
	}
	if sig := first.Signal(); sig != syscall.SIGKILL {
		t.Fatalf("sidecar exit: signal %v", sig)
	}
	// The crash window: the database exists with this request's marker, no record yet.
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 1 ||
		queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1`, db) != 0 {
		t.Fatal("not in the crash window after the kill")
	}

	f.startSidecar()
	st, e, res := f.waitRow(id)
	if st != "succeeded" || res["status"] != cluster.StatusAdopted {
		t.Fatalf("after restart: %s %s %v", st, e, res)
	}
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1 OR datname = $2`, db,
		"dataenv_tmp_"+strings.ReplaceAll(id, "-", "")) != 1 {
		t.Fatal("orphan or missing database")
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1 AND created_by_request = $2::uuid`, db, id); n != 1 {
		t.Fatalf("%d records", n)
	}
	if strings.Contains(first.Logs(), f.adminPW) {
		t.Fatal("the admin password is in the sidecar's logs")
	}
}

func TestEndToEndConcurrentCreatesAndWaitingStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	sc := f.startSidecar()
	db := f.prefix + "same"

	// Hold the lifecycle lock: the requests show that they wait.
	held, err := lock.Lifecycle(f.ctx, f.pool, f.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{
		queryString(t, f.sql, `SELECT dataenv.create_database($1, $2)::text`, f.name, db),
		queryString(t, f.sql, `SELECT dataenv.create_database($1, $2)::text`, f.name, db),
	}
	eventually(t, func() bool {
		return queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.requests
			WHERE id = ANY($1::uuid[]) AND steps @> '[{"status": "waiting"}]'`, ids) == 2
	})
	if err := held.Release(f.ctx); err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for _, id := range ids {
		st, e, _ := f.waitRow(id)
		outcomes[st]++
		if st == "failed" && !strings.Contains(e, "already exists") {
			t.Fatalf("the losing create failed uncleanly: %s", e)
		}
	}
	if outcomes["succeeded"] != 1 || outcomes["failed"] != 1 {
		t.Fatalf("outcomes %v", outcomes)
	}
	if queryInt(t, f.ext(), `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 1 {
		t.Fatal("not exactly one database")
	}
	// The rows carry no secret.
	rows := queryString(t, f.sql, `SELECT string_agg(row_to_json(r)::text, ' ') FROM dataenv.requests r`)
	if strings.Contains(rows, f.adminPW) || strings.Contains(sc.Logs()+f.logs.String(), f.adminPW) {
		t.Fatal("the admin password leaked into rows or logs")
	}
}
