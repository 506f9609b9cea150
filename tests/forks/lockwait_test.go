package forks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestForkSaysWhatLockItWaitsFor: a session holds a table of the parent in ACCESS EXCLUSIVE mode
// in an open transaction (a migration left half done), so the full_copy is a dump, and pg_dump
// waits for the table's lock. The request says so while it waits: its first step does not wait
// for the lock (the size of the parent's tables is estimated), and a waiting step names the
// table and the session that holds it. Once that transaction ends, the fork is made, rows and all.
func TestForkSaysWhatLockItWaitsFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	db := f.parentDB("lk", 3)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, db)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, db)

	holder := external.Connect(t, db)
	mustExec(t, holder, `BEGIN; LOCK TABLE public.orders IN ACCESS EXCLUSIVE MODE`)
	pid := queryInt(t, holder, `SELECT pg_backend_pid()`)
	id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork)
	want := fmt.Sprintf("table public.orders (AccessShareLock), held by session %d", pid)
	var steps []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		steps = stepsOf(t, a, id)
		if slicesContainsPart(steps, "waiting: ", want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no waiting step names %q; steps:\n%s", want, strings.Join(steps, "\n"))
		}
	}
	if !slicesContainsPart(steps, "loading: ", "a table is locked") {
		t.Errorf("the loading step does not say the size was estimated for a locked table; steps:\n%s", strings.Join(steps, "\n"))
	}
	mustExec(t, holder, `COMMIT`)
	f.mustSucceed(id)
	if n := queryInt(t, external.Connect(t, names.ForkDatabase(fork, "d")), `SELECT count(*) FROM public.orders`); n != 3 {
		t.Errorf("the fork has %d orders, want the parent's 3", n)
	}
}

// stepsOf is the steps of request id as "status: detail" lines.
func stepsOf(t *testing.T, a user, id string) []string {
	t.Helper()
	rows, _ := a.conn.Query(context.Background(), `SELECT s->>'status' || ': ' || coalesce(s->>'detail', '')
		FROM dataenv.requests, jsonb_array_elements(steps) s WHERE id = $1::uuid`, id)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("steps of %s: %v", id, err)
	}
	return out
}

// slicesContainsPart: some line starts with prefix and contains part.
func slicesContainsPart(lines []string, prefix, part string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, part) {
			return true
		}
	}
	return false
}
