package lock_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"})
		return err
	})
}

func installed(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pg.DSN(installedDatabase(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// installedDatabase is a new database with dataenv installed.
func installedDatabase(t *testing.T) string {
	t.Helper()
	db := pg.CreateDatabase(t)
	if _, err := install.Install(context.Background(), pg.Connect(t, db), install.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestWaitingIsSignalledAndReleaseUnblocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := installed(t)
	first, err := lock.Lifecycle(ctx, pool, "c1", func() { t.Error("the first holder waited") })
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		second, err := lock.Lifecycle(ctx, pool, "c1", func() { close(waiting) })
		if err == nil {
			err = second.Release(ctx)
		}
		got <- err
	}()
	<-waiting
	// Another cluster's lock is independent.
	other, err := lock.Lifecycle(ctx, pool, "c2", func() { t.Error("c2 waited for c1") })
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

// TestSQLTransactionLockUsesTheSameKey: while the Go side holds the session lock, the SQL
// function's transaction lock on the same cluster cannot be taken, and can once released.
func TestSQLTransactionLockUsesTheSameKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := installed(t)
	held, err := lock.Lifecycle(ctx, pool, "shared", nil)
	if err != nil {
		t.Fatal(err)
	}
	try := func() error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT dataenv.lock_cluster_lifecycle('shared')`)
		return err
	}
	if err := try(); err == nil || !strings.Contains(err.Error(), "55P03") {
		t.Fatalf("SQL lock while Go holds it: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := try(); err != nil {
		t.Fatalf("SQL lock after release: %v", err)
	}
	// And the other way round: XactLifecycle blocks the session lock.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.XactLifecycle(ctx, tx, "shared"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	_, err = lock.Lifecycle(cctx, pool, "shared", cancel)
	if err == nil {
		t.Fatal("session lock taken while a transaction holds it")
	}
	_ = tx.Rollback(ctx)
}

// TestCancelledWaitLeavesNoLock: abandoning a wait closes the connection, so nothing stays locked.
func TestCancelledWaitLeavesNoLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := installed(t)
	held, err := lock.Lifecycle(ctx, pool, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	if _, err := lock.Lifecycle(cctx, pool, "c", cancel); err == nil {
		t.Fatal("cancelled wait returned a lock")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := lock.Lifecycle(ctx, pool, "c", func() { t.Error("lock still held after the cancelled wait") })
	if err != nil {
		t.Fatal(err)
	}
	_ = again.Release(ctx)
}
