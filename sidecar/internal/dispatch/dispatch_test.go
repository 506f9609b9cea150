package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/replication"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "dispatch"})
		return err
	})
}

// fixture is one installed control database, a dispatcher on it with test handlers, and its
// signals. The dispatcher runs until the test ends.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	db      string
	dsn     string
	conn    *pgx.Conn
	pool    *pgxpool.Pool
	d       *dispatch.Dispatcher
	sig     *dispatch.Signals
	release chan struct{} // closes to let test_block handlers return
	mu      sync.Mutex
	seen    []*request.Request          // requests test handlers were called with
	failed  map[uuid.UUID]bool          // test_fail_once: the requests that failed once already
	held    map[uuid.UUID]chan struct{} // test_job: closed by releaseJob to let one request return
	stash   map[chan dispatch.Event][]dispatch.Event
}

// test kinds: test_ok succeeds; test_block waits for release (or its context); test_fail_once
// fails with a transient fault at its first attempt, test_fail_always at every one; test_ping is
// stateless, and test_ping_flaky too, failing transiently at its first run.
// test_job waits until releaseJob lets that one request return.
// test_hold_* hold steps for the outcome (reporter_test.go).
var testKinds = []string{"test_ok", "test_block", "test_fail_once", "test_fail_always", "test_ping", "test_ping_flaky", "test_job",
	"test_hold_short", "test_hold_long", "test_hold_order", "test_hold_again"}

type stateless struct{ request.HandlerFunc }

func (stateless) Stateless() bool { return true }

func newFixture(t *testing.T, tune func(*dispatch.Config)) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{t: t, ctx: ctx, release: make(chan struct{}), failed: map[uuid.UUID]bool{},
		stash: map[chan dispatch.Event][]dispatch.Event{}, held: map[uuid.UUID]chan struct{}{}}
	f.db = pg.CreateDatabase(t)
	f.dsn = pg.DSN(f.db)
	f.conn = pg.Connect(t, f.db)
	if _, err := install.Install(ctx, f.conn, install.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	for _, k := range testKinds {
		testenv.MustExec(t, f.conn, `INSERT INTO dataenv.request_kinds (kind, description) VALUES ($1, 'test')`, k)
	}
	pool, err := pgxpool.New(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	f.pool = pool
	reg := request.NewRegistry(control.Authorizer{Q: pool})
	reg.Register("test_ok", request.HandlerFunc(f.ok))
	reg.Register("test_block", request.HandlerFunc(f.block))
	reg.Register("test_fail_once", request.HandlerFunc(f.failOnce))
	reg.Register("test_fail_always", request.HandlerFunc(func(context.Context, *request.Request, request.Reporter) (any, error) {
		return nil, request.Retryable(errors.New("the cluster is restarting"))
	}))
	reg.Register("test_ping", stateless{request.HandlerFunc(f.ok)})
	var flaky sync.Once
	reg.Register("test_ping_flaky", stateless{request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
		failed := false
		flaky.Do(func() { failed = true })
		if failed {
			return nil, request.Retryable(errors.New("FATAL: terminating connection due to administrator command"))
		}
		return f.ok(ctx, req, rep)
	})})
	reg.Register("test_job", request.HandlerFunc(f.job))
	f.sig = dispatch.NewSignals()
	cfg := dispatch.Config{Pool: pool, DSN: f.dsn, Instance: uuid.New(), Registry: reg, Signals: f.sig,
		Logger: slog.New(slog.DiscardHandler)}
	if tune != nil {
		tune(&cfg)
	}
	f.d = dispatch.New(cfg)
	f.d.Start(ctx, ctx)
	t.Cleanup(func() {
		cancel()
		pool.Close()
	})
	return f
}

func (f *fixture) record(req *request.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := *req
	f.seen = append(f.seen, &r)
}

func (f *fixture) ok(_ context.Context, req *request.Request, _ request.Reporter) (any, error) {
	f.record(req)
	return map[string]int{"attempt": req.Attempts}, nil
}

func (f *fixture) block(ctx context.Context, req *request.Request, _ request.Reporter) (any, error) {
	f.record(req)
	select {
	case <-f.release:
		return map[string]bool{"released": true}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (f *fixture) failOnce(ctx context.Context, req *request.Request, _ request.Reporter) (any, error) {
	f.record(req)
	if fence.FromContext(ctx) == nil || fence.FromContext(ctx).Number != req.Attempts {
		return nil, errors.New("the handler's context does not carry its attempt")
	}
	f.mu.Lock()
	first := !f.failed[req.ID]
	f.failed[req.ID] = true
	f.mu.Unlock()
	if first {
		return nil, errors.New("terminating connection due to administrator command (SQLSTATE 57P01)")
	}
	return map[string]int{"attempt": req.Attempts}, nil
}

// insert makes a committed request row and returns it as the dispatcher would decode it.
func (f *fixture) insert(kind string) (request.Request, string) {
	f.t.Helper()
	var r request.Request
	var xact string
	err := f.conn.QueryRow(f.ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ($1, '{}') RETURNING id, kind, created_at, xact::text`, kind).
		Scan(&r.ID, &r.Kind, &r.CreatedAt, &xact)
	if err != nil {
		f.t.Fatal(err)
	}
	r.Status, r.RequestedBy, r.Args = request.Pending, pg.SuperUser, []byte("{}")
	return r, xact
}

// tx is the decoded transaction of an insert of r (made by transaction xact).
func tx(r request.Request, xact string) *replication.Tx {
	v := func(s string) *string { return &s }
	return &replication.Tx{Changes: []replication.Change{{Table: "requests", Op: replication.Insert, Values: map[string]*string{
		"id": v(r.ID.String()), "kind": v(r.Kind), "args": v("{}"), "status": v("pending"), "attempts": v("0"),
		"requested_by": v(r.RequestedBy), "cancel_requested": v("f"), "xact": v(xact),
		"created_at": v(r.CreatedAt.UTC().Format("2006-01-02 15:04:05.999999-07")),
	}}}}
}

// deliver hands tx to the dispatcher and returns a channel closed when it is acknowledged.
func (f *fixture) deliver(t *replication.Tx) <-chan struct{} {
	acked := make(chan struct{})
	var once sync.Once
	if err := f.d.Deliver(f.ctx, t, func() { once.Do(func() { close(acked) }) }); err != nil {
		f.t.Fatal(err)
	}
	return acked
}

// await returns the next event of request id on ch (events of other requests are kept for
// their own await); the timeout only guards against a hang.
func (f *fixture) await(what string, ch chan dispatch.Event, id uuid.UUID) dispatch.Event {
	f.t.Helper()
	f.mu.Lock()
	kept := f.stash[ch]
	for i, ev := range kept {
		if ev.Request == id {
			f.stash[ch] = append(kept[:i:i], kept[i+1:]...)
			f.mu.Unlock()
			return ev
		}
	}
	f.mu.Unlock()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Request == id {
				return ev
			}
			f.mu.Lock()
			f.stash[ch] = append(f.stash[ch], ev)
			f.mu.Unlock()
		case <-deadline:
			f.t.Fatalf("no %s event for request %s", what, id)
		}
	}
}

func closed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

type row struct {
	status   string
	attempts int
	errText  *string
}

func (f *fixture) row(id uuid.UUID) row {
	f.t.Helper()
	var r row
	if err := f.conn.QueryRow(f.ctx, `SELECT status, attempts, error FROM dataenv.requests WHERE id = $1`, id).
		Scan(&r.status, &r.attempts, &r.errText); err != nil {
		f.t.Fatal(err)
	}
	return r
}

func TestDeliveredRequestIsClaimedRunAndAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r, xact := f.insert("test_ok")
	acked := f.deliver(tx(r, xact))
	if ev := f.await("claimed", f.sig.Claimed, r.ID); ev.Attempt != 1 {
		t.Fatalf("claimed attempt %d, want 1", ev.Attempt)
	}
	closed(t, "the acknowledgement of the claimed request's transaction", acked)
	if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Succeeded {
		t.Fatalf("outcome %s", ev.Status)
	}
	if got := f.row(r.ID); got.status != "succeeded" || got.attempts != 1 {
		t.Fatalf("row %+v", got)
	}
}

// TestInvisibleRowIsClaimedOnceVisible: a decoded insert whose transaction is still in progress
// (exactly what a commit waiting for a synchronous standby looks like) is neither claimed nor let
// go nor acknowledged; once it commits, it is claimed.
func TestInvisibleRowIsClaimedOnceVisible(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	open, err := f.conn.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r request.Request
	var xact string
	if err := open.QueryRow(f.ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ('test_ok', '{}') RETURNING id, created_at, xact::text`).
		Scan(&r.ID, &r.CreatedAt, &xact); err != nil {
		t.Fatal(err)
	}
	r.Kind, r.RequestedBy = "test_ok", pg.SuperUser
	acked := f.deliver(tx(r, xact))
	for range 3 { // several claims, each judging the row not visible yet
		if ev := f.await("deferred", f.sig.Deferred, r.ID); ev.Reason != "not visible yet" {
			t.Fatalf("deferred because %q", ev.Reason)
		}
	}
	select {
	case <-acked:
		t.Fatal("the transaction of an unclaimed request was acknowledged")
	default:
	}
	if !f.d.InFlight(r.ID) {
		t.Fatal("the invisible request left the dispatcher")
	}
	if err := open.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.await("claimed", f.sig.Claimed, r.ID)
	closed(t, "the acknowledgement", acked)
	f.await("written", f.sig.Written, r.ID)
	if got := f.row(r.ID); got.status != "succeeded" || got.attempts != 1 {
		t.Fatalf("row %+v", got)
	}
}

// TestStatelessOutcomeWaitsForVisibility: a stateless request runs at once; its outcome, written
// while its row is still invisible, is written again until the row shows up.
func TestStatelessOutcomeWaitsForVisibility(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	open, err := f.conn.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r request.Request
	var xact string
	if err := open.QueryRow(f.ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ('test_ping', '{}') RETURNING id, created_at, xact::text`).
		Scan(&r.ID, &r.CreatedAt, &xact); err != nil {
		t.Fatal(err)
	}
	r.Kind, r.RequestedBy = "test_ping", pg.SuperUser
	acked := f.deliver(tx(r, xact))
	testenv.Eventually(t, 60*time.Second, "the stateless handler to run", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.seen) == 1
	})
	if err := open.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Succeeded {
		t.Fatalf("outcome %s", ev.Status)
	}
	closed(t, "the acknowledgement", acked)
}

// TestDeletedRowIsLetGo: a decoded request whose transaction committed but whose row is gone is
// let go (and acknowledged), not retried forever.
func TestDeletedRowIsLetGo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r, xact := f.insert("test_ok")
	testenv.MustExec(t, f.conn, `DELETE FROM dataenv.requests WHERE id = $1`, r.ID)
	acked := f.deliver(tx(r, xact))
	if ev := f.await("let go", f.sig.LetGo, r.ID); ev.Reason != "deleted" {
		t.Fatalf("let go because %q", ev.Reason)
	}
	closed(t, "the acknowledgement", acked)
}

// TestStaleClaimLetsGo: a decoded request whose row moved on (a newer attempt owns it; it
// finished) is let go: its claim matched no row and a new snapshot proves it is someone else's.
func TestStaleClaimLetsGo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	newer, x1 := f.insert("test_ok")
	testenv.MustExec(t, f.conn, `UPDATE dataenv.requests SET status = 'running', attempts = 3 WHERE id = $1`, newer.ID)
	done, x2 := f.insert("test_ok")
	testenv.MustExec(t, f.conn, `UPDATE dataenv.requests SET status = 'succeeded', attempts = 1 WHERE id = $1`, done.ID)
	a1, a2 := f.deliver(tx(newer, x1)), f.deliver(tx(done, x2))
	if ev := f.await("let go", f.sig.LetGo, newer.ID); ev.Reason != "attempt 3, not 0" {
		t.Fatalf("newer attempt let go because %q", ev.Reason)
	}
	if ev := f.await("let go", f.sig.LetGo, done.ID); ev.Reason != "finished" {
		t.Fatalf("finished request let go because %q", ev.Reason)
	}
	closed(t, "the acknowledgements", a1)
	closed(t, "the acknowledgements", a2)
	if got := f.row(newer.ID); got.status != "running" || got.attempts != 3 {
		t.Fatalf("the newer attempt's row changed: %+v", got)
	}
}

// TestCancelRacingAClaim: a cancellation committed before the claim finishes a pending request
// at once (the claim then finds it finished), and one that reached a running request while no
// handler held it (a dead attempt's) is written as cancelled by the rescuing claim.
func TestCancelRacingAClaim(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	pending, xact := f.insert("test_ok")
	testenv.MustExec(t, f.conn, `SELECT dataenv.cancel($1)`, pending.ID)
	f.deliver(tx(pending, xact))
	f.await("let go", f.sig.LetGo, pending.ID)
	if got := f.row(pending.ID); got.status != "cancelled" {
		t.Fatalf("cancelled pending request is %+v", got)
	}

	running, _ := f.insert("test_ok")
	testenv.MustExec(t, f.conn, `UPDATE dataenv.requests SET status = 'running', attempts = 2 WHERE id = $1`, running.ID)
	testenv.MustExec(t, f.conn, `SELECT dataenv.cancel($1)`, running.ID)
	running.Status, running.Attempts = request.Running, 2
	if !f.d.Rescue(running) {
		t.Fatal("not rescued")
	}
	if ev := f.await("written", f.sig.Written, running.ID); ev.Status != request.Cancelled || ev.Attempt != 2 {
		t.Fatalf("outcome %+v", ev)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) != 0 {
		t.Fatalf("a handler ran for a cancelled request: %+v", f.seen)
	}
}

// TestCancelWhileRunning: the decoded cancellation stops the running handler, and the outcome is
// cancelled.
func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r, xact := f.insert("test_block")
	f.deliver(tx(r, xact))
	f.await("claimed", f.sig.Claimed, r.ID)
	testenv.MustExec(t, f.conn, `SELECT dataenv.cancel($1)`, r.ID)
	v := func(s string) *string { return &s }
	f.deliver(&replication.Tx{Changes: []replication.Change{{Table: "request_cancellations", Op: replication.Insert,
		Values: map[string]*string{"request_id": v(r.ID.String())}}}})
	if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Cancelled {
		t.Fatalf("outcome %s", ev.Status)
	}
}

// TestTransientFailureRetriesAsANewAttempt: a transient fault is retried (a "retrying" step) as
// attempt 2, which succeeds; the request does not fail.
func TestTransientFailureRetriesAsANewAttempt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r, xact := f.insert("test_fail_once")
	f.deliver(tx(r, xact))
	if ev := f.await("retrying", f.sig.Retrying, r.ID); ev.Attempt != 1 {
		t.Fatalf("retrying after attempt %d", ev.Attempt)
	}
	if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Succeeded || ev.Attempt != 2 {
		t.Fatalf("outcome %+v", ev)
	}
	steps := testenv.QueryText(t, f.conn, `SELECT steps::text FROM dataenv.requests WHERE id = $1`, r.ID)
	if !strings.Contains(steps, `"status": "retrying"`) {
		t.Fatalf("no retrying step: %s", steps)
	}
}

// TestStatelessTransientFailureRunsAgain: a stateless request (ping: never claimed) that hits a
// transient fault (its policy check's session terminated) runs again instead of failing.
func TestStatelessTransientFailureRunsAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r, xact := f.insert("test_ping_flaky")
	f.deliver(tx(r, xact))
	f.await("retrying", f.sig.Retrying, r.ID)
	if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Succeeded {
		t.Fatalf("outcome %+v", ev)
	}
}

// TestTransientFailureOutlastingTheWindowFails: past the retry window the request fails, and
// the error says it kept failing.
func TestTransientFailureOutlastingTheWindowFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *dispatch.Config) { c.RetryWindow = time.Nanosecond })
	r, xact := f.insert("test_fail_always")
	f.deliver(tx(r, xact))
	f.await("retrying", f.sig.Retrying, r.ID) // the first failure is always retried
	if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Failed || ev.Attempt != 2 {
		t.Fatalf("outcome %+v", ev)
	}
	if got := f.row(r.ID); got.errText == nil || !strings.Contains(*got.errText, "still failing after retrying") {
		t.Fatalf("error %v", got.errText)
	}
}

// TestGateLimit: with a limit of one gate, two requests in flight hold one gate between them; a
// waiter of the ungated one still gets its outcome (its backoff re-check).
func TestGateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *dispatch.Config) { c.GateLimit = 1 })
	a, xa := f.insert("test_block")
	b, xb := f.insert("test_block")
	f.deliver(tx(a, xa))
	f.deliver(tx(b, xb))
	f.await("claimed", f.sig.Claimed, a.ID)
	f.await("claimed", f.sig.Claimed, b.ID)
	gates := `SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = dataenv.lock_class('gate')::oid AND objid IN (hashtext($1::text)::oid, hashtext($2::text)::oid)`
	testenv.Eventually(t, 60*time.Second, "one gate", func() bool {
		return testenv.Query[int](t, f.conn, gates, a.ID, b.ID) == 1
	})
	got := make(chan string, 2)
	for _, id := range []uuid.UUID{a.ID, b.ID} {
		waiter := pg.Connect(t, f.db)
		go func() {
			var status string
			_ = waiter.QueryRow(context.Background(), `SELECT status FROM dataenv.wait($1, '60 s')`, id).Scan(&status)
			got <- status
		}()
	}
	close(f.release)
	for range 2 {
		if s := <-got; s != "succeeded" {
			t.Fatalf("a waiter saw %q", s)
		}
	}
	// The outcome is visible before the worker's gate session lets go of the lock: wait for it.
	testenv.Eventually(t, 60*time.Second, "no gate held after both finished", func() bool {
		return testenv.Query[int](t, f.conn, gates, a.ID, b.ID) == 0
	})
}
