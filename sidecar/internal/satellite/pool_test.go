package satellite_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	acquire := func(d db) (*satellite.Conn, func(bool)) {
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
	got := make(chan *satellite.Conn)
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

// Callers queued for one database are served, as each is done, by the connection already open to
// it, ahead of an older caller of another database: a queue of envelopes for one satellite costs
// one dial, not one each. After 8 such passes the older caller gets its turn, then the rest.
func TestPoolServesQueuedCallersOfOneDatabaseWithOneConnection(t *testing.T) {
	ctrl, dbs := databases(t, 2)
	p := satellite.NewPool(ctrl, 1, time.Hour)
	ctx := context.Background()
	a, releaseA, err := p.Acquire(ctx, dbs[0].oid, dbs[0].name)
	if err != nil {
		t.Fatal(err)
	}
	pidA := a.PgConn().PID()
	type served struct {
		who string
		pid uint32
	}
	const callersOfA = 10
	order := make(chan served, callersOfA+1)
	var wg sync.WaitGroup
	queue := func(who string, d db) {
		want := p.Waiting() + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, release, err := p.Acquire(ctx, d.oid, d.name)
			if err != nil {
				t.Error(err)
				return
			}
			order <- served{who, c.PgConn().PID()}
			release(true)
		}()
		testenv.Eventually(t, 10*time.Second, who+" to queue", func() bool { return p.Waiting() == want })
	}
	queue("B", dbs[1]) // first in the queue, for the other database
	for i := range callersOfA {
		queue(fmt.Sprintf("A%d", i), dbs[0])
	}
	releaseA(true)
	wg.Wait()
	close(order)
	var got []served
	for s := range order {
		got = append(got, s)
	}
	if len(got) != callersOfA+1 || got[8].who != "B" {
		t.Fatalf("served %v, want eight callers of A, then B, then the other two of A", got)
	}
	for _, s := range got[:8] {
		if s.pid != pidA {
			t.Fatalf("caller %s of A got backend %d, not A's open connection %d (served %v)", s.who, s.pid, pidA, got)
		}
	}
	if got[8].pid == pidA || got[9].pid != got[10].pid || got[9].pid == got[8].pid {
		t.Fatalf("after B the last two callers of A should share one new connection: served %v", got)
	}
	p.CloseIdle(time.Time{})
}

// Under churn (callers of more databases than connections, some giving their connection back
// broken) the server never sees more of the pool's backends than its limit, and a connection
// closed by release(false) is gone from the server when release returns.
func TestPoolStaysWithinItsLimitUnderChurn(t *testing.T) {
	ctrl, dbs := databases(t, 6)
	const limit = 2
	p := satellite.NewPool(ctrl, limit, time.Hour)
	ctx := context.Background()
	watcher, err := ctrl.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Release()
	var peak atomic.Int64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int64
			if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dataenv_satellite_envelopes'`).Scan(&n); err == nil && n > peak.Load() {
				peak.Store(n)
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := dbs[(i*7)%len(dbs)]
			c, release, err := p.Acquire(ctx, d.oid, d.name)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.Exec(ctx, `SELECT 1`); err != nil {
				t.Error(err)
			}
			release(i%5 != 0)
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	if peak.Load() > limit {
		t.Fatalf("%d backends of the pool on the server at once, limit %d", peak.Load(), limit)
	}
	if open, inUse := p.Stats(); open > limit || inUse != 0 {
		t.Fatalf("after the churn: open %d in use %d", open, inUse)
	}
	c, release, err := p.Acquire(ctx, dbs[0].oid, dbs[0].name)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.PgConn().PID()
	release(false)
	var alive bool
	if err := ctrl.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil || alive {
		t.Fatalf("backend %d still on the server after release(false) returned (err %v)", pid, err)
	}
	p.CloseIdle(time.Time{})
	if n := backends(t, ctrl); n != 0 {
		t.Fatalf("%d of the pool's backends left after CloseIdle returned", n)
	}
}

// Run closes a connection once it has been idle for the idle timeout (--satellite-idle-timeout),
// and one used again before that stays open, on the same backend.
func TestPoolClosesConnectionsIdlePastTheTimeout(t *testing.T) {
	ctrl, dbs := databases(t, 1)
	const idle = 2 * time.Second
	p := satellite.NewPool(ctrl, 2, idle)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	use := func() int {
		t.Helper()
		c, release, err := p.Acquire(ctx, dbs[0].oid, dbs[0].name)
		if err != nil {
			t.Fatal(err)
		}
		defer release(true)
		return int(c.PgConn().PID())
	}
	pid := use()
	for range 3 { // each use well within the timeout: never closed
		time.Sleep(idle / 4)
		if again := use(); again != pid {
			t.Fatalf("a connection used again within the idle timeout was replaced (backend %d, then %d)", pid, again)
		}
	}
	if open, _ := p.Stats(); open != 1 {
		t.Fatalf("open %d after uses within the idle timeout, want 1", open)
	}
	testenv.Eventually(t, 30*time.Second, "the idle connection to close", func() bool {
		open, _ := p.Stats()
		return open == 0 && backends(t, ctrl) == 0
	})
}
