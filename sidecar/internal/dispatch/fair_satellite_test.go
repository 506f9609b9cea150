package dispatch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/satellite"
	"github.com/dataenv/dataenv/tests/testenv"
)

// testEnvelopeKind stands for kind satellite in these tests: a real envelope's handler needs its
// origin database, and scheduling is all that is tested here. The dispatcher's hooks treat it as
// an envelope (satellite.SchedulingKind and satellite.SchedulingOwner on a copy of kind
// satellite), and its handler holds like test_job.
const testEnvelopeKind = "test_envelope"

// satelliteJobs configures conc job slots, perUser and perWorkspace caps, and the satellite
// scheduling hooks; f is set once newFixture returns, before any request is delivered.
func satelliteJobs(f **fixture, conc, perUser, perWorkspace int) func(*dispatch.Config) {
	asEnvelope := func(req request.Request) request.Request {
		if req.Kind == testEnvelopeKind {
			req.Kind = satellite.Kind
		}
		return req
	}
	return func(c *dispatch.Config) {
		c.JobKinds, c.JobConcurrency, c.JobsPerUser, c.JobsPerWorkspace, c.Concurrency = []string{"test_job", "run"}, conc, perUser, perWorkspace, 1
		c.SchedulingKind = func(req request.Request) string { return satellite.SchedulingKind(asEnvelope(req)) }
		c.SchedulingOwner = func(req request.Request) (string, string) { return satellite.SchedulingOwner(asEnvelope(req)) }
		c.Registry.Register(testEnvelopeKind, request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
			return (*f).job(ctx, req, rep)
		}))
	}
}

// submitArgs inserts a request of kind with args made by user and delivers it.
func (f *fixture) submitArgs(kind, user, args string) request.Request {
	f.t.Helper()
	var r request.Request
	var xact string
	err := f.conn.QueryRow(f.ctx, `INSERT INTO dataenv.requests (kind, args, requested_by) VALUES ($1, $2::jsonb, $3)
		RETURNING id, kind, created_at, xact::text`, kind, args, user).Scan(&r.ID, &r.Kind, &r.CreatedAt, &xact)
	if err != nil {
		f.t.Fatal(err)
	}
	r.Status, r.RequestedBy, r.Args = request.Pending, user, []byte(args)
	change := tx(r, xact)
	change.Changes[0].Values["args"] = &args
	f.deliver(change)
	return r
}

// envelopeArgs is an envelope's args from satellite database oid for a run by requester in
// workspace.
func envelopeArgs(oid, requester, workspace string) string {
	return `{"database_oid": "` + oid + `", "installation_id": "00000000-0000-0000-0000-000000000001", "request_id": "r", "xact": "7",
		"protocol": 1, "kind": "run", "requested_by": "` + requester + `", "workspace": "` + workspace + `"}`
}

func newSatelliteFixture(t *testing.T, conc, perUser, perWorkspace int) *fixture {
	var f *fixture
	f = newFixture(t, satelliteJobs(&f, conc, perUser, perWorkspace))
	testenv.MustExec(t, f.conn, `INSERT INTO dataenv.request_kinds (kind, description) VALUES ($1, 'test')`, testEnvelopeKind)
	return f
}

// Two satellites' jobs by roles of the same name count against two users: with one job per
// user, the second satellite's job starts while the first satellite's second job waits for its
// own user, not for the other satellite's.
func TestSatelliteJobsCountAgainstTheSatelliteCaller(t *testing.T) {
	t.Parallel()
	f := newSatelliteFixture(t, 4, 1, 4)
	logins := f.users(2) // the two satellites' login roles
	a1 := f.submitArgs(testEnvelopeKind, logins[0], envelopeArgs("101", "alice", "wa"))
	a2 := f.submitArgs(testEnvelopeKind, logins[0], envelopeArgs("101", "alice", "wb"))
	b1 := f.submitArgs(testEnvelopeKind, logins[1], envelopeArgs("202", "alice", "wc"))
	f.await("claim of satellite A's first job", f.sig.Claimed, a1.ID)
	f.await("claim of satellite B's job", f.sig.Claimed, b1.ID)
	ev := f.await("queue step of satellite A's second job", f.sig.Queued, a2.ID)
	if !strings.Contains(ev.Reason, "101/alice runs 1 jobs already") {
		t.Fatalf("queue step %q; want it to wait for 101/alice", ev.Reason)
	}
	f.releaseJob(a1.ID)
	f.await("claim of satellite A's second job", f.sig.Claimed, a2.ID)
	for _, j := range []request.Request{a2, b1} {
		f.releaseJob(j.ID)
	}
	for _, j := range []request.Request{a1, a2, b1} {
		f.await("job outcome", f.sig.Written, j.ID)
	}
}

// A workspace's jobs share its cap whether they were made in the control database or in a
// satellite: with one job per workspace, a satellite's job in the workspace a control job runs
// in waits for it, and a satellite job in another workspace does not.
func TestSatelliteAndControlJobsShareTheWorkspaceCap(t *testing.T) {
	t.Parallel()
	f := newSatelliteFixture(t, 4, 4, 1)
	us := f.users(2) // a control user and a satellite's login role
	ctrl := f.submitArgs("test_job", us[0], `{"workspace": "shared"}`)
	f.await("claim of the control job", f.sig.Claimed, ctrl.ID)
	same := f.submitArgs(testEnvelopeKind, us[1], envelopeArgs("101", "bob", "shared"))
	other := f.submitArgs(testEnvelopeKind, us[1], envelopeArgs("101", "bob", "elsewhere"))
	f.await("claim of the satellite job in another workspace", f.sig.Claimed, other.ID)
	ev := f.await("queue step of the satellite job in the shared workspace", f.sig.Queued, same.ID)
	if !strings.Contains(ev.Reason, "workspace shared runs 1 jobs already") {
		t.Fatalf("queue step %q; want it to wait for workspace shared", ev.Reason)
	}
	f.releaseJob(ctrl.ID)
	f.await("claim of the satellite job in the shared workspace", f.sig.Claimed, same.ID)
	f.releaseJob(same.ID)
	f.releaseJob(other.ID)
	for _, j := range []request.Request{ctrl, same, other} {
		f.await("job outcome", f.sig.Written, j.ID)
	}
}

// Envelopes waiting for satellite connections hold remote workers only: with every remote worker
// held and more envelopes queued, a control ping and a claimed control kind run at once.
func TestControlRequestsNeverWaitBehindEnvelopes(t *testing.T) {
	t.Parallel()
	var f *fixture
	f = newFixture(t, func(c *dispatch.Config) {
		c.Concurrency, c.RemoteConcurrency = 1, 2
		c.Remote = func(req request.Request) bool { return req.Kind == testEnvelopeKind }
		c.Registry.Register(testEnvelopeKind, request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
			return f.job(ctx, req, rep)
		}))
	})
	testenv.MustExec(t, f.conn, `INSERT INTO dataenv.request_kinds (kind, description) VALUES ($1, 'test')`, testEnvelopeKind)
	u := f.users(1)[0]
	var envelopes []request.Request
	for range 5 {
		envelopes = append(envelopes, f.submitArgs(testEnvelopeKind, u, `{"kind": "ping"}`))
	}
	f.controlRunsBeside(u, "envelope", envelopes)
}
