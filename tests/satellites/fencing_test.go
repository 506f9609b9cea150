package satellites_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// A satellite dropped and re-created while its envelope waits is fenced out: the envelope fails,
// nothing runs for it, and nothing is written into the replacement, even into a row that carries
// the same id. Both ways: the satellite's schema replaced in the same database (a new installation
// UUID), and the database itself dropped and re-created under its name (a new OID).
func TestReplacedSatelliteIsFencedWhileItsEnvelopeWaits(t *testing.T) {
	c := newControl(t)
	inPlace, replacedDB := newSatellite(t, c), newSatellite(t, c)
	ctx := context.Background()
	// No sidecar yet: both envelopes wait in the control database.
	idInPlace, idReplaced := ping(t, inPlace.Conn), ping(t, replacedDB.Conn)

	// The schema replaced in place: dropped behind dataenv's back (the registration stays), then a
	// new satellite installed in the same database.
	testenv.MustExec(t, inPlace.Conn, `DROP SCHEMA dataenv CASCADE`)
	installSatellite(t, c, inPlace.DB)
	// The database dropped and a new one created under the same name, with a satellite in it.
	replacedDB.Conn.Close(ctx)
	admin := pg.Connect(t, "postgres")
	testenv.MustExec(t, admin, `DROP DATABASE `+pgx.Identifier{replacedDB.DB}.Sanitize()+` WITH (FORCE)`)
	testenv.MustExec(t, admin, `CREATE DATABASE `+pgx.Identifier{replacedDB.DB}.Sanitize())
	replacement := installSatellite(t, c, replacedDB.DB)
	fresh := pg.Connect(t, inPlace.DB)
	// Each replacement holds a pending row with the id the old envelope names (inserted without
	// triggers, so it files no envelope of its own).
	for _, x := range []struct {
		conn *pgx.Conn
		id   uuid.UUID
	}{{fresh, idInPlace}, {replacement.Conn, idReplaced}} {
		testenv.MustExec(t, x.conn, `SET session_replication_role = replica`)
		testenv.MustExec(t, x.conn, `INSERT INTO dataenv.requests (id, kind) VALUES ($1, 'ping')`, x.id)
		testenv.MustExec(t, x.conn, `RESET session_replication_role`)
	}

	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	for _, id := range []uuid.UUID{idInPlace, idReplaced} {
		row := waitDone(t, c.Conn, id)
		if row.Status != "failed" || row.Error == nil || !strings.Contains(*row.Error, "fenced") {
			t.Errorf("envelope %s of a replaced satellite finished %s (error %v), want failed as fenced", id, row.Status, row.Error)
		}
	}
	for _, x := range []struct {
		conn *pgx.Conn
		id   uuid.UUID
	}{{fresh, idInPlace}, {replacement.Conn, idReplaced}} {
		var status string
		var attempts int
		if err := x.conn.QueryRow(ctx, `SELECT status, attempts FROM dataenv.requests WHERE id = $1`, x.id).Scan(&status, &attempts); err != nil {
			t.Fatal(err)
		}
		if status != "pending" || attempts != 0 {
			t.Errorf("the replacement's row %s is %s after %d attempts: the fenced envelope wrote into it", x.id, status, attempts)
		}
		// The replacements are served as satellites of their own.
		if row := waitDone(t, x.conn, ping(t, x.conn)); row.Status != "succeeded" {
			t.Errorf("ping in a replacement satellite finished %s (error %v)", row.Status, row.Error)
		}
	}
}

// A sidecar killed after it wrote the outcome into the satellite's row but before the envelope's
// outcome was committed finishes the request once: the next leader finds the outcome in the
// satellite and finishes the envelope with it, without running the request again.
func TestCrashBetweenSatelliteOutcomeAndEnvelopeOutcomeFinishesOnce(t *testing.T) {
	c := newControl(t)
	s := newSatellite(t, c)
	p := sidecartest.Start(t, sidecartest.Options{DSN: c.DSN, Env: []string{"DATAENV_CRASH_AT=satellite.after_origin_outcome"}})
	waitStreaming(t, c.Conn)
	id := ping(t, s.Conn)
	if err := p.WaitExit(60 * time.Second); err != nil {
		t.Fatalf("the sidecar did not stop at the crash point: %v", err)
	}
	var status string
	var attempts int
	if err := s.Conn.QueryRow(context.Background(), `SELECT status, attempts FROM dataenv.requests WHERE id = $1`, id).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || attempts != 1 {
		t.Fatalf("satellite row after the crash: %s after %d attempts, want succeeded after 1", status, attempts)
	}
	if st := testenv.QueryText(t, c.Conn, `SELECT status FROM dataenv.requests WHERE id = $1`, id); st == "succeeded" {
		t.Fatalf("the envelope finished before the crash point: the test proves nothing")
	}
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	row := waitDone(t, c.Conn, id)
	if row.Status != "succeeded" || string(row.Result) != `{"pong": true}` {
		t.Fatalf("envelope after the restart finished %s with %s (error %v)", row.Status, row.Result, row.Error)
	}
	if err := s.Conn.QueryRow(context.Background(), `SELECT status, attempts FROM dataenv.requests WHERE id = $1`, id).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || attempts != 1 {
		t.Fatalf("satellite row after the restart: %s after %d attempts, want succeeded written once", status, attempts)
	}
}
