package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/tests/testenv"
)

// hold returns the channel that releases test_job request id.
func (f *fixture) hold(id uuid.UUID) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.held[id]
	if !ok {
		ch = make(chan struct{})
		f.held[id] = ch
	}
	return ch
}

func (f *fixture) job(ctx context.Context, req *request.Request, _ request.Reporter) (any, error) {
	f.record(req)
	select {
	case <-f.hold(req.ID):
		return map[string]bool{"released": true}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (f *fixture) releaseJob(id uuid.UUID) { close(f.hold(id)) }

// users makes n login roles that are dataenv administrators (test kinds have no policy, so
// only administrators may request them), dropped at the end of the test.
func (f *fixture) users(n int) []string {
	f.t.Helper()
	var names []string
	for i := range n {
		name := strings.ToLower(pg.NamePrefix(f.t)) + "u" + string(rune('a'+i))
		pg.DropRolesAtCleanup(f.t, name)
		testenv.MustExec(f.t, f.conn, `CREATE ROLE `+name+` IN ROLE dataenv_admin`)
		names = append(names, name)
	}
	return names
}

// submit inserts a request of kind made by user and delivers it.
func (f *fixture) submit(kind, user string) request.Request {
	f.t.Helper()
	var r request.Request
	var xact string
	err := f.conn.QueryRow(f.ctx, `INSERT INTO dataenv.requests (kind, args, requested_by) VALUES ($1, '{}', $2)
		RETURNING id, kind, created_at, xact::text`, kind, user).Scan(&r.ID, &r.Kind, &r.CreatedAt, &xact)
	if err != nil {
		f.t.Fatal(err)
	}
	r.Status, r.RequestedBy, r.Args = request.Pending, user, []byte("{}")
	f.deliver(tx(r, xact))
	return r
}

func jobsConfig(conc, perUser int) func(*dispatch.Config) {
	return func(c *dispatch.Config) {
		c.JobKinds, c.JobConcurrency, c.JobsPerUser, c.Concurrency = []string{"test_job"}, conc, perUser, 1
	}
}

// Control-plane requests have workers of their own: with every job slot held by long jobs and
// more jobs queued, a ping (and any claimed control kind) runs at once.
func TestPingNeverWaitsForJobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobsConfig(2, 2))
	u := f.users(1)[0]
	var jobs []request.Request
	for range 6 {
		jobs = append(jobs, f.submit("test_job", u))
	}
	f.controlRunsBeside(u, "job", jobs)
}

// controlRunsBeside checks that, once the first two of held (long requests of another class,
// which then hold every worker of it) are claimed, a ping and a claimed control kind of user
// finish while the rest of held stay queued; then it lets held finish.
func (f *fixture) controlRunsBeside(user, what string, held []request.Request) {
	f.t.Helper()
	f.await("claim of "+what+" 1", f.sig.Claimed, held[0].ID)
	f.await("claim of "+what+" 2", f.sig.Claimed, held[1].ID)
	ping, ok := f.submit("test_ping", user), f.submit("test_ok", user)
	if ev := f.await("ping outcome", f.sig.Written, ping.ID); ev.Status != request.Succeeded {
		f.t.Fatalf("ping: %s", ev.Status)
	}
	if ev := f.await("test_ok outcome", f.sig.Written, ok.ID); ev.Status != request.Succeeded {
		f.t.Fatalf("test_ok: %s", ev.Status)
	}
	if q, _ := f.d.Counts(); q != len(held)-2 {
		f.t.Fatalf("%d requests queued; want the %d waiting %ss", q, len(held)-2, what)
	}
	for _, r := range held {
		f.releaseJob(r.ID)
	}
	for _, r := range held {
		f.await(what+" outcome", f.sig.Written, r.ID)
	}
}

// One user's 20 long jobs take at most JobsPerUser slots: another user's job starts at once,
// while the flood waits, and the waiting jobs' steps say where they stand.
func TestOneUsersFloodDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobsConfig(3, 0)) // JobsPerUser defaults to 2
	us := f.users(2)
	var flood []request.Request
	for range 20 {
		flood = append(flood, f.submit("test_job", us[0]))
	}
	f.await("claim of flood job 1", f.sig.Claimed, flood[0].ID)
	f.await("claim of flood job 2", f.sig.Claimed, flood[1].ID)
	other := f.submit("test_job", us[1])
	f.await("claim of the other user's job", f.sig.Claimed, other.ID)
	ev := f.await("queue step of flood job 20", f.sig.Queued, flood[19].ID)
	if !strings.Contains(ev.Reason, "position 18 of 18") || !strings.Contains(ev.Reason, "at most 2 per user") {
		t.Fatalf("queue step %q", ev.Reason)
	}
	var steps string
	if err := f.conn.QueryRow(f.ctx, `SELECT steps::text FROM dataenv.requests WHERE id = $1`, flood[19].ID).Scan(&steps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(steps, `"queue"`) || !strings.Contains(steps, "waiting jobs") {
		t.Fatalf("steps of a waiting job: %s", steps)
	}
	f.releaseJob(other.ID)
	for _, j := range flood {
		f.releaseJob(j.ID)
	}
	for _, j := range append(flood, other) {
		f.await("job outcome", f.sig.Written, j.ID)
	}
}

// With no slot kept free (JobsPerUser = JobConcurrency), another user's job waits for one free
// slot only: the first slot the flood gives back goes to it, not to the flood's next job.
func TestAnotherUsersJobTakesTheNextFreeSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, jobsConfig(2, 2))
	us := f.users(2)
	var flood []request.Request
	for range 10 {
		flood = append(flood, f.submit("test_job", us[0]))
	}
	f.await("claim of flood job 1", f.sig.Claimed, flood[0].ID)
	f.await("claim of flood job 2", f.sig.Claimed, flood[1].ID)
	other := f.submit("test_job", us[1])
	if ev := f.await("queue step of the other user's job", f.sig.Queued, other.ID); !strings.Contains(ev.Reason, "all 2 job slots are busy") {
		t.Fatalf("queue step %q", ev.Reason)
	}
	f.releaseJob(flood[0].ID)
	f.await("outcome of flood job 1", f.sig.Written, flood[0].ID)
	select {
	case ev := <-f.sig.Claimed: // the very next claim of any request
		if ev.Request != other.ID {
			t.Fatalf("request %s took the free slot; it was the other user's job's", ev.Request)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no job took the free slot")
	}
	f.releaseJob(other.ID)
	for _, j := range flood[1:] {
		f.releaseJob(j.ID)
	}
	for _, j := range append(flood[1:], other) {
		f.await("job outcome", f.sig.Written, j.ID)
	}
}
