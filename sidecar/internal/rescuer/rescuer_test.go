package rescuer_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/rescuer"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "rescuer"})
		return err
	})
}

// observer records what the rescuer reports.
type observer struct {
	mu               sync.Mutex
	rescued          map[string]int
	pending, running time.Duration
}

func (o *observer) RequestRescued(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rescued[reason]++
}

func (o *observer) SetOldestUnfinished(p, r time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending, o.running = p, r
}

type fixture struct {
	t    *testing.T
	ctx  context.Context
	conn *pgx.Conn
	d    *dispatch.Dispatcher
	sig  *dispatch.Signals
	r    *rescuer.Rescuer
	obs  *observer
	hold chan struct{} // test_block handlers return when it closes
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{t: t, ctx: ctx, obs: &observer{rescued: map[string]int{}}, hold: make(chan struct{})}
	db := pg.CreateDatabase(t)
	f.conn = pg.Connect(t, db)
	if _, err := install.Install(ctx, f.conn, install.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	testenv.MustExec(t, f.conn, `INSERT INTO dataenv.request_kinds (kind, description) VALUES ('test_ok', 'test'), ('test_block', 'test')`)
	pool, err := pgxpool.New(ctx, pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	reg := request.NewRegistry(control.Authorizer{Q: pool})
	reg.Register("test_ok", request.HandlerFunc(func(_ context.Context, req *request.Request, _ request.Reporter) (any, error) {
		return map[string]int{"attempt": req.Attempts}, nil
	}))
	reg.Register("test_block", request.HandlerFunc(func(ctx context.Context, _ *request.Request, _ request.Reporter) (any, error) {
		select {
		case <-f.hold:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	}))
	f.sig = dispatch.NewSignals()
	quiet := slog.New(slog.DiscardHandler)
	f.d = dispatch.New(dispatch.Config{Pool: pool, DSN: pg.DSN(db), Instance: uuid.New(), Registry: reg, Signals: f.sig, Logger: quiet})
	f.d.Start(ctx, ctx)
	f.r = rescuer.New(rescuer.Config{Pool: pool, Dispatcher: f.d, RescueAfter: 10 * time.Second, BatchSize: 2,
		Logger: quiet, Observer: f.obs})
	t.Cleanup(func() {
		close(f.hold)
		cancel()
		pool.Close()
	})
	return f
}

// insert makes a pending request.
func (f *fixture) insert(kind string) uuid.UUID {
	f.t.Helper()
	return testenv.Query[uuid.UUID](f.t, f.conn, `INSERT INTO dataenv.requests (kind, args) VALUES ($1, '{}') RETURNING id`, kind)
}

// age sets the request's status and attempts, and dates its creation and last update age ago.
func (f *fixture) age(id uuid.UUID, status string, attempts int, age time.Duration) {
	f.t.Helper()
	testenv.MustExec(f.t, f.conn, `UPDATE dataenv.requests SET status = $2, attempts = $3,
		created_at = clock_timestamp() - $4::interval, updated_at = clock_timestamp() - $4::interval WHERE id = $1`,
		id, status, attempts, age)
}

// events collects the events of ch until each of ids has one; the timeout only guards
// against a hang.
func events(t *testing.T, ch chan dispatch.Event, ids ...uuid.UUID) map[uuid.UUID]dispatch.Event {
	t.Helper()
	got := map[uuid.UUID]dispatch.Event{}
	deadline := time.After(60 * time.Second)
	for {
		missing := false
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				missing = true
			}
		}
		if !missing {
			return got
		}
		select {
		case ev := <-ch:
			if _, ok := got[ev.Request]; !ok {
				got[ev.Request] = ev
			}
		case <-deadline:
			t.Fatalf("events %v, waiting for all of %v", got, ids)
		}
	}
}

// TestRescuesPendingAndOrphanedRunningRequests: a pending request past the threshold that no
// worker holds (a missed wake-up) and a running one whose attempt nobody holds are handed to the
// dispatcher and finish; young requests and requests in flight are left alone.
func TestRescuesPendingAndOrphanedRunningRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var lost []uuid.UUID
	for range 3 { // more than one batch
		id := f.insert("test_ok")
		f.age(id, "pending", 0, time.Minute)
		lost = append(lost, id)
	}
	orphan := f.insert("test_ok")
	f.age(orphan, "running", 2, time.Minute)
	young := f.insert("test_ok")
	busy := f.insert("test_block")
	requester := testenv.Query[string](t, f.conn, `SELECT requested_by FROM dataenv.requests WHERE id = $1`, busy)
	if !f.d.Rescue(request.Request{ID: busy, Kind: "test_block", Status: request.Pending, RequestedBy: requester}) {
		t.Fatal("could not queue the busy request")
	}
	events(t, f.sig.Claimed, busy)
	f.age(busy, "running", 1, time.Minute) // looks orphaned by age, but a worker holds it

	res, err := f.r.Sweep(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rescued[rescuer.ReasonPending] != 3 || res.Rescued[rescuer.ReasonRunning] != 1 || res.Seen != 5 {
		t.Fatalf("sweep %+v, want 3 pending and 1 running rescued of 5 seen", res)
	}
	written := events(t, f.sig.Written, append(lost, orphan)...)
	for _, id := range lost {
		if ev := written[id]; ev.Status != request.Succeeded || ev.Attempt != 1 {
			t.Fatalf("rescued pending request: %+v", ev)
		}
	}
	if ev := written[orphan]; ev.Status != request.Succeeded || ev.Attempt != 3 {
		t.Fatalf("rescued running request: %+v, want attempt 3", ev)
	}
	if f.d.InFlight(young) {
		t.Fatal("a young pending request was rescued")
	}
	f.obs.mu.Lock()
	defer f.obs.mu.Unlock()
	if f.obs.rescued["pending"] != 3 || f.obs.rescued["running"] != 1 {
		t.Fatalf("observed rescues %v", f.obs.rescued)
	}
	if f.obs.running < time.Minute {
		t.Fatalf("oldest running request reported %s old, it is over a minute", f.obs.running)
	}
}

// TestRunSweepsPeriodically: Run sweeps on its interval until its context ends.
func TestRunSweepsPeriodically(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.insert("test_ok")
	f.age(id, "pending", 0, time.Minute)
	sig := rescuer.NewSignals()
	pool, err := pgxpool.New(f.ctx, f.conn.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r := rescuer.New(rescuer.Config{Pool: pool, Dispatcher: f.d, Interval: 10 * time.Millisecond,
		RescueAfter: 10 * time.Second, Logger: slog.New(slog.DiscardHandler), Signals: sig})
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	if res := <-sig.Swept; res.Rescued[rescuer.ReasonPending] != 1 {
		t.Fatalf("first sweep %+v", res)
	}
	events(t, f.sig.Written, id)
	if res := <-sig.Swept; len(res.Rescued) != 0 {
		t.Fatalf("a later sweep rescued again: %+v", res)
	}
	cancel()
	<-done
}
