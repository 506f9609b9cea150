package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestWorkspaceLocksOnPooledSessions: a workspace lock keeps a second holder waiting until it is
// released; the session it was held on serves the next holder holding nothing; a wait abandoned
// by its context leaves neither a lock nor its session behind.
func TestWorkspaceLocksOnPooledSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := installedDatabase(t)
	app := "wsl-" + uuid.NewString()[:8]
	control, err := pgxpool.New(ctx, pg.DSN(db)+"&application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(control.Close)
	sessions, err := lock.NewWorkspaceSessions(control)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sessions.Close)
	watch := pg.Connect(t, db)
	count := func(sql string, args ...any) int { return testenv.Query[int](t, watch, sql, args...) }
	sessionsOpen := func() int {
		return count(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app)
	}
	const advisory = `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`
	waiting := func() bool { return count(advisory+` AND NOT granted`) == 1 }

	first, err := sessions.Workspace(ctx, "ws-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Also(ctx, "ws-b"); err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.WorkspaceLocks, 1)
	go func() {
		w, err := sessions.Workspace(ctx, "ws-b")
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	testenv.Eventually(t, 30*time.Second, "a second holder of ws-b waits", waiting)
	first.Close(ctx)
	second := <-got
	if n := count(advisory); n != 1 {
		t.Fatalf("%d advisory locks with the second holder alone, want its 1", n)
	}
	second.Close(ctx)
	if n := count(advisory); n != 0 {
		t.Fatalf("%d advisory locks left after both holders closed", n)
	}
	if n := sessionsOpen(); n != 2 {
		t.Fatalf("%d workspace sessions open, want the 2 both holders used, kept", n)
	}
	third, err := sessions.Workspace(ctx, "ws-a")
	if err != nil {
		t.Fatal(err)
	}
	if n := sessionsOpen(); n != 2 {
		t.Fatalf("%d workspace sessions open after a third holder, want 2: it takes a kept one", n)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		testenv.Eventually(t, 30*time.Second, "a fourth holder of ws-a waits", waiting)
		cancel()
	}()
	if _, err := sessions.Workspace(cctx, "ws-a"); err == nil {
		t.Fatal("a cancelled wait returned the lock")
	}
	testenv.Eventually(t, 30*time.Second, "the cancelled waiter's session is closed", func() bool { return sessionsOpen() == 1 })
	third.Close(ctx)
	if n := count(advisory); n != 0 {
		t.Fatalf("%d advisory locks left after the cancelled wait and the third holder", n)
	}
	again, err := sessions.Workspace(ctx, "ws-a")
	if err != nil {
		t.Fatal(err)
	}
	again.Close(ctx)
}
