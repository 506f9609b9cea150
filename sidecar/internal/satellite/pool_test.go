package satellite_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/satellite"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "satellites"})
		return err
	})
}

type db struct {
	name string
	oid  uint32
}

func databases(t *testing.T, n int) (*pgxpool.Pool, []db) {
	t.Helper()
	ctrl, err := pgxpool.New(context.Background(), pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctrl.Close)
	var out []db
	for range n {
		name := pg.CreateDatabase(t)
		var oid uint32
		if err := ctrl.QueryRow(context.Background(), `SELECT oid FROM pg_database WHERE datname = $1`, name).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		out = append(out, db{name, oid})
	}
	return ctrl, out
}

func backends(t *testing.T, ctrl *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := ctrl.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dataenv_satellite_envelopes'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The pool reuses an idle connection to the same database, gives up the oldest idle one for
// another database, makes a caller wait only when every connection is in use, and never has more
// backends on the server than its limit.
func TestPoolStaysWithinItsLimit(t *testing.T) {
	ctrl, dbs := databases(t, 3)
	p := satellite.NewPool(ctrl, 2, time.Hour)
	ctx := context.Background()
	acquire := func(d db) (*pgx.Conn, func(bool)) {
		t.Helper()
		c, release, err := p.Acquire(ctx, d.oid, d.name)
		if err != nil {
			t.Fatal(err)
		}
		return c, release
	}
	a, releaseA := acquire(dbs[0])
	pidA := a.PgConn().PID()
	releaseA(true)
	a2, releaseA2 := acquire(dbs[0])
	if a2.PgConn().PID() != pidA {
		t.Fatalf("a second use of database A opened a new connection instead of the idle one")
	}
	_, releaseB := acquire(dbs[1])
	if open, inUse := p.Stats(); open != 2 || inUse != 2 {
		t.Fatalf("stats open %d in use %d, want 2 and 2", open, inUse)
	}
	got := make(chan *pgx.Conn)
	go func() {
		c, release, err := p.Acquire(ctx, dbs[2].oid, dbs[2].name)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- c
		release(true)
	}()
	releaseA2(true) // idle now: given up for database C
	c := <-got
	if c == nil {
		t.FailNow()
	}
	if n := backends(t, ctrl); n > 2 {
		t.Fatalf("%d backends of the pool on the server, limit 2", n)
	}
	releaseB(false) // closed, not kept
	p.CloseIdle(time.Time{})
	if open, inUse := p.Stats(); open != 0 || inUse != 0 {
		t.Fatalf("after closing everything: open %d in use %d", open, inUse)
	}
	testenv.Eventually(t, 10*time.Second, "the pool's backends to go", func() bool { return backends(t, ctrl) == 0 })
}

// A caller waiting for a connection gives up with its context.
func TestPoolWaitEndsWithTheContext(t *testing.T) {
	ctrl, dbs := databases(t, 2)
	p := satellite.NewPool(ctrl, 1, time.Hour)
	_, release, err := p.Acquire(context.Background(), dbs[0].oid, dbs[0].name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, _, err := p.Acquire(ctx, dbs[1].oid, dbs[1].name); err == nil {
		t.Fatal("a second connection was handed out beyond the limit of 1")
	}
	release(true)
	c, release2, err := p.Acquire(context.Background(), dbs[1].oid, dbs[1].name)
	if err != nil || c == nil {
		t.Fatalf("after the release: %v", err)
	}
	release2(true)
	p.CloseIdle(time.Time{})
}
