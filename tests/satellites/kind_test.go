package satellites_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// An envelope carries its row's kind so the dispatcher can class it; the kind is only a hint. A
// run filed as a ping (so it would dodge the job caps) is refused when its row is loaded: the
// satellite's row fails with the reason, and no result is written.
func TestEnvelopeNamingAnotherKindThanItsRowRunsNothing(t *testing.T) {
	c, s, genuine := servedSatellite(t)
	if k := testenv.QueryText(t, c.Conn, `SELECT args->>'kind' FROM dataenv.requests WHERE id = $1`, genuine); k != "ping" {
		t.Fatalf("the ping's envelope carries kind %q", k)
	}

	forged := fileRun(t, s, "ping", "", "w")
	row := waitDone(t, s.Conn, forged)
	if row.Status != "failed" || row.Error == nil || !strings.Contains(*row.Error, `envelope says kind "ping"`) || row.Result != nil {
		t.Fatalf("the run filed as a ping finished %s (error %v, result %s), want failed as refused", row.Status, row.Error, row.Result)
	}
	// The envelope's outcome is written in the control after the satellite's row: wait for it.
	if env := waitDone(t, c.Conn, forged); env.Status != "failed" {
		t.Fatalf("the forged envelope finished %s, want failed", env.Status)
	}
	if got := testenv.QueryText(t, c.Conn, `SELECT status || ' ' || (args->>'kind') FROM dataenv.requests WHERE id = $1`, forged); got != "failed ping" {
		t.Fatalf("the forged envelope: %s", got)
	}
}

// servedSatellite is a control and a satellite of it served by a sidecar, and a ping made in the
// satellite that succeeded.
func servedSatellite(t *testing.T) (control, satellite, uuid.UUID) {
	t.Helper()
	c := newControl(t)
	s := newSatellite(t, c)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	waitStreaming(t, c.Conn)
	genuine := ping(t, s.Conn)
	if row := waitDone(t, s.Conn, genuine); row.Status != "succeeded" {
		t.Fatalf("ping finished %s (error %v)", row.Status, row.Error)
	}
	return c, s, genuine
}

// fileRun makes a run in workspace w in the satellite whose envelope is filed by hand in the same
// transaction instead of by the commit trigger (held off for that one insert), with the hints
// given: kind, requested_by ("" for the row's own) and workspace.
func fileRun(t *testing.T, s satellite, kind, requestedBy, workspace string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var id uuid.UUID
	steps := []struct {
		sql  string
		scan bool
	}{
		{`ALTER TABLE dataenv.requests DISABLE TRIGGER requests_send_envelope`, false},
		{`SELECT dataenv.run('w', 'SELECT 1')`, true},
		{`ALTER TABLE dataenv.requests ENABLE TRIGGER requests_send_envelope`, false},
	}
	for _, st := range steps {
		if st.scan {
			err = tx.QueryRow(ctx, st.sql).Scan(&id)
		} else {
			_, err = tx.Exec(ctx, st.sql)
		}
		if err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}
	if _, err := tx.Exec(ctx, `SELECT dataenv.control_exec(format('SELECT dataenv.satellite_enqueue_v1(%L::uuid, %L::xid8, %L, %L::name, %L)::text',
		id, xact, $2::text, coalesce(nullif($3, ''), requested_by::text), $4::text))
		FROM dataenv.requests WHERE id = $1`, id, kind, requestedBy, workspace); err != nil {
		t.Fatalf("file the envelope by hand: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return id
}

// An envelope carries its row's requester and workspace, which a job counts against; they are
// hints too. A run whose envelope names another requester or another workspace (so it would
// count against someone else's caps) is refused when its row is loaded, and nothing runs.
func TestEnvelopeNamingAnotherRequesterOrWorkspaceRunsNothing(t *testing.T) {
	c, s, genuine := servedSatellite(t)
	requester := testenv.QueryText(t, s.Conn, `SELECT requested_by::text FROM dataenv.requests WHERE id = $1`, genuine)
	hints := testenv.QueryText(t, c.Conn, `SELECT (args->>'requested_by') || ' ' || (args ? 'workspace')::text FROM dataenv.requests WHERE id = $1`, genuine)
	if hints != requester+" false" {
		t.Fatalf("the ping's envelope hints %q, want its requester %s and no workspace", hints, requester)
	}
	for _, tc := range []struct {
		name                   string
		requestedBy, workspace string
		want                   string
	}{
		{"another requester", "someone_else", "w", `envelope says requested_by "someone_else"`},
		{"another workspace", "", "elsewhere", `envelope says workspace "elsewhere"`},
	} {
		forged := fileRun(t, s, "run", tc.requestedBy, tc.workspace)
		row := waitDone(t, s.Conn, forged)
		if row.Status != "failed" || row.Error == nil || !strings.Contains(*row.Error, tc.want) || row.Result != nil {
			t.Fatalf("a run whose envelope names %s finished %s (error %v, result %s), want failed as refused", tc.name, row.Status, row.Error, row.Result)
		}
	}
}
