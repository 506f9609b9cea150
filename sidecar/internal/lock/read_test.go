package lock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/lock"
)

// heldReadSQL counts the advisory locks its own session holds, and the rows of a table the test
// writes under the lock: what the read sees must be what was there once the lock was held.
const heldReadSQL = `SELECT (SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_catalog.pg_backend_pid()),
       (SELECT count(*) FROM lock_read_rows)`

type readCounts struct{ locks, rows, scans int }

func countingRead(got *readCounts) *lock.Read {
	return &lock.Read{SQL: heldReadSQL, Scan: func(row pgx.Row) error {
		got.scans++
		return row.Scan(&got.locks, &got.rows)
	}}
}

// A read made with a free lock runs in the try-lock's round trip with the lock held; with a busy
// lock, what it saw before the wait is dropped and it is made again once the lock is held: it
// sees what the former holder wrote. Scan is called once either way.
func TestReadIsMadeWithTheLockHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := installed(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE lock_read_rows (x int)`); err != nil {
		t.Fatal(err)
	}
	var free readCounts
	err := lock.WithRead(ctx, pool, lock.ClassLifecycle, "r1", func() { t.Error("a free lock waited") }, countingRead(&free),
		func(ctx context.Context, held *lock.Held) error { return nil })
	if err != nil || free != (readCounts{locks: 1, rows: 0, scans: 1}) {
		t.Fatalf("free lock: %+v, %v; want the lock held, no rows, one scan", free, err)
	}

	first, err := lock.Lifecycle(ctx, pool, "r1", nil)
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	var busy readCounts
	done := make(chan error, 1)
	go func() {
		done <- lock.WithRead(ctx, pool, lock.ClassLifecycle, "r1", func() { close(waiting) }, countingRead(&busy),
			func(ctx context.Context, held *lock.Held) error { return nil })
	}()
	<-waiting
	if _, err := first.Conn().Exec(ctx, `INSERT INTO lock_read_rows VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || busy != (readCounts{locks: 1, rows: 1, scans: 1}) {
		t.Fatalf("busy lock: %+v, %v; want the lock held, the holder's row, one scan", busy, err)
	}
}

// A read that fails (in the server, or in Scan) is WithRead's error: fn is not called and the
// lock is released.
func TestFailedReadReleasesTheLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := installed(t)
	mine := errors.New("not there")
	for _, read := range []*lock.Read{
		{SQL: `SELECT 1/0`, Scan: func(row pgx.Row) error { var x int; return row.Scan(&x) }},
		{SQL: `SELECT 1`, Scan: func(pgx.Row) error { return mine }},
	} {
		err := lock.WithRead(ctx, pool, lock.ClassLifecycle, "r2", nil, read,
			func(ctx context.Context, held *lock.Held) error { t.Error("fn ran after a failed read"); return nil })
		if err == nil || (read.SQL == `SELECT 1` && !errors.Is(err, mine)) {
			t.Fatalf("%s: %v, want the read's error", read.SQL, err)
		}
		held, err := lock.TryAcquire(ctx, pool, lock.ClassLifecycle, "r2")
		if err != nil || held == nil {
			t.Fatalf("%s: the lock is still held after the failed read (%v)", read.SQL, err)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
