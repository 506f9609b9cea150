package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

// Application code can LISTEN dataenv_request_finished: every request that reaches a final
// status is announced once, with its id as payload, whether its outcome was written in a batch
// by the sidecar or it was cancelled before it started; updates that finish nothing (steps,
// claims, a second cancel) announce nothing.
func TestFinishedRequestsAreNotifiedOnce(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	ctx := context.Background()
	listener := pg.Connect(t, conn.Config().Database)
	mustExec(t, listener, `LISTEN dataenv_request_finished`)

	// Cancelled while no sidecar runs: finished by the cancel itself, in SQL.
	pending := newRequest(t, conn, "ping", `{}`)
	mustExec(t, conn, `SELECT dataenv.cancel($1)`, pending)
	mustExec(t, conn, `SELECT dataenv.cancel($1)`, pending)

	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	want := map[uuid.UUID]bool{pending: true}
	var ids []uuid.UUID
	if err := conn.QueryRow(ctx, `SELECT array_agg(dataenv.ping()) FROM generate_series(1, 20)`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	effects := newRequest(t, conn, "test_effects", `{}`) // appends steps before its outcome
	for _, id := range append(ids, effects) {
		want[id] = true
	}
	got := map[uuid.UUID]int{}
	for len(got) < len(want) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := listener.WaitForNotification(wctx)
		cancel()
		if err != nil {
			t.Fatalf("%d of %d requests notified: %v", len(got), len(want), err)
		}
		id := uuid.MustParse(n.Payload)
		if !want[id] {
			t.Fatalf("notified of %s, a request this test did not finish", id)
		}
		got[id]++
	}
	// Nothing more may follow: a second notification of any request would be a duplicate.
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if n, err := listener.WaitForNotification(wctx); err == nil {
		t.Fatalf("extra notification for %s", n.Payload)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv.requests WHERE status NOT IN ('succeeded', 'cancelled')`); n != 0 {
		t.Fatalf("%d requests unfinished after all were notified", n)
	}
}
