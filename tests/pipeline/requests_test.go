package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

func TestCommittedRequestRunsOnceRolledBackNever(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	ctx := context.Background()

	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rolledBack uuid.UUID
	if err := tx.QueryRow(ctx, `INSERT INTO dataenv.requests (kind) VALUES ('test_effects') RETURNING id`).Scan(&rolledBack); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	id := newRequest(t, conn, "test_effects", `{}`)
	row := sidecartest.Wait(t, conn, id, 30*time.Second)
	if row.Status != "succeeded" || row.Attempts != 1 {
		t.Fatalf("request finished as %s after %d attempts (error %v), want succeeded after 1", row.Status, row.Attempts, row.Error)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects WHERE request_id = $1`, id); n != 2 {
		t.Fatalf("committed request made %d effects, want 2", n)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects WHERE request_id = $1`, rolledBack); n != 0 {
		t.Fatalf("rolled-back request made %d effects", n)
	}
}

func TestPingAndWaitThroughSQL(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	var status, result string
	err := conn.QueryRow(context.Background(),
		`SELECT status, result::text FROM dataenv.wait(dataenv.ping(), '30 s')`).Scan(&status, &result)
	if err == nil || !strings.Contains(err.Error(), "has not committed") {
		t.Fatalf("wait on a request of the same transaction: err = %v, want the commit-first error", err)
	}
	var id uuid.UUID
	if err := conn.QueryRow(context.Background(), `SELECT dataenv.ping()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(context.Background(), `SELECT status, result::text FROM dataenv.wait($1)`, id).Scan(&status, &result); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || result != `{"pong": true}` {
		t.Fatalf("ping finished %s with %s", status, result)
	}
}

func TestWaitTimesOutWithRowAsItStands(t *testing.T) {
	t.Parallel()
	_, conn := controlDB(t) // no sidecar: the request stays pending
	id := newRequest(t, conn, "ping", `{}`)
	start := time.Now()
	row := sidecartest.Wait(t, conn, id, 300*time.Millisecond)
	if row.Status != "pending" {
		t.Fatalf("status %s, want pending", row.Status)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatalf("wait returned before its timeout")
	}
}

func TestBadInputIsRefusedAndNothingRuns(t *testing.T) {
	t.Parallel()
	_, conn := controlDB(t)
	ctx := context.Background()
	cases := []struct{ name, kind, args, want string }{
		{"unknown kind", "no_such_kind", `{}`, `unknown kind "no_such_kind"`},
		{"args not an object", "ping", `[1,2]`, "args must be a JSON object"},
		{"unknown argument", "ping", `{"bogus": 1}`, `unknown argument "bogus"`},
		{"bad argument type", "ping", `{"sleep_ms": "soon"}`, "sleep_ms must be a number"},
		{"oversized args", "ping", `{"x": "` + strings.Repeat("a", 70000) + `"}`, "the limit is 65536"},
	}
	for _, c := range cases {
		_, err := conn.Exec(ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ($1, $2::jsonb)`, c.kind, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv.requests`); n != 0 {
		t.Fatalf("%d requests inserted by bad input", n)
	}
}

func TestCancelPendingAndRunning(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	pending := newRequest(t, conn, "ping", `{}`)
	mustExec(t, conn, `SELECT dataenv.cancel($1)`, pending)
	if row := sidecartest.Wait(t, conn, pending, time.Second); row.Status != "cancelled" {
		t.Fatalf("cancelled pending request is %s", row.Status)
	}
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	running := newRequest(t, conn, "ping", `{"sleep_ms": 600000}`)
	eventually(t, 20*time.Second, "the sleeping ping to start", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM dataenv.requests WHERE id = $1 AND started_at IS NOT NULL OR id = $1 AND status <> 'pending'`, running) == 1 ||
			queryInt(t, conn, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = dataenv.lock_class('gate')::oid`) > 0
	})
	mustExec(t, conn, `SELECT dataenv.cancel($1)`, running)
	row := sidecartest.Wait(t, conn, running, 20*time.Second)
	if row.Status != "cancelled" {
		t.Fatalf("cancelled running request is %s (error %v)", row.Status, row.Error)
	}
}
