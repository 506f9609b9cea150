package satellites_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// Requests from three satellites and the control run at once, one sidecar serving them, and each
// outcome lands in the database the request was made in.
func TestRequestsOfThreeSatellitesAndTheControlLandInTheirOwnDatabases(t *testing.T) {
	c := newControl(t)
	sats := []satellite{newSatellite(t, c), newSatellite(t, c), newSatellite(t, c)}
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	waitStreaming(t, c.Conn)

	const perDB = 10
	dbs := append([]string{c.DB}, sats[0].DB, sats[1].DB, sats[2].DB)
	ids := make([][]uuid.UUID, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		conn := pg.Connect(t, db)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perDB {
				ids[i] = append(ids[i], ping(t, conn))
			}
			for _, id := range ids[i] {
				row := waitDone(t, conn, id)
				if row.Status != "succeeded" || string(row.Result) != `{"pong": true}` {
					t.Errorf("ping %s in %s finished %s with %s (error %v)", id, db, row.Status, row.Result, row.Error)
				}
			}
		}()
	}
	wg.Wait()
	for i, s := range sats {
		for j, other := range dbs {
			// The control holds each satellite request's envelope under the same id, as kind satellite.
			n := testenv.Query[int](t, pg.Connect(t, other), `SELECT count(*) FROM dataenv.requests WHERE id = ANY($1) AND kind = 'ping'`, ids[i+1])
			want := 0
			if j == i+1 {
				want = perDB
			}
			if n != want {
				t.Errorf("%d of satellite %s's requests are in database %s, want %d", n, s.DB, other, want)
			}
		}
		if n := testenv.Query[int](t, c.Conn, `SELECT count(*) FROM dataenv.requests WHERE id = ANY($1) AND kind = 'satellite' AND status = 'succeeded'
			AND args->>'installation_id' = (SELECT installation_id::text FROM dataenv.satellites WHERE database_name = $2)`, ids[i+1], s.DB); n != perDB {
			t.Errorf("satellite %s: %d succeeded envelopes in the control database, want %d", s.DB, n, perDB)
		}
	}
}

// A satellite request whose transaction rolls back never runs, even when its envelope reached
// the control database before the rollback.
func TestRolledBackSatelliteRequestNeverRuns(t *testing.T) {
	c := newControl(t)
	s := newSatellite(t, c)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	waitStreaming(t, c.Conn)
	ctx := context.Background()

	// Plain rollback: the commit-time trigger never fires, nothing reaches the control.
	tx, err := s.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var plain uuid.UUID
	if err := tx.QueryRow(ctx, `SELECT dataenv.ping()`).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// The envelope filed before the rollback (its trigger made immediate): the sidecar sees it
	// while the origin transaction is in progress, and discards it once it rolled back.
	tx, err = s.Conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var early uuid.UUID
	if _, err := tx.Exec(ctx, `SET CONSTRAINTS dataenv.requests_send_envelope IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT dataenv.ping()`).Scan(&early); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30e9, "the envelope in the control database", func() bool {
		return testenv.Query[int](t, c.Conn, `SELECT count(*) FROM dataenv.requests WHERE id = $1`, early) == 1
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	row := waitDone(t, c.Conn, early)
	if row.Status != "failed" || row.Error == nil || !strings.Contains(*row.Error, "rolled back") {
		t.Fatalf("envelope of the rolled-back request finished %s (error %v), want failed as discarded", row.Status, row.Error)
	}
	if n := testenv.Query[int](t, c.Conn, `SELECT count(*) FROM dataenv.requests WHERE id = $1`, plain); n != 0 {
		t.Fatalf("the plainly rolled-back request has an envelope")
	}
	if n := testenv.Query[int](t, s.Conn, `SELECT count(*) FROM dataenv.requests`); n != 0 {
		t.Fatalf("the satellite has %d requests after two rollbacks", n)
	}
	// The satellite keeps working.
	if row := waitDone(t, s.Conn, ping(t, s.Conn)); row.Status != "succeeded" {
		t.Fatalf("ping after the rollbacks finished %s (error %v)", row.Status, row.Error)
	}
}

// Satellite privileges are local: a user sees only their own requests in a satellite, being a
// dataenv user in the control or in another satellite grants nothing, and a satellite's admin
// sees every request of that satellite only.
func TestRLSIsolatesUsersWithinAndAcrossSatellites(t *testing.T) {
	c := newControl(t)
	a, b := newSatellite(t, c), newSatellite(t, c)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	alice := newUser(t, a.UserRole)
	bob := newUser(t, a.UserRole, b.UserRole)
	carol := newUser(t, "dataenv_user", "dataenv_admin", b.AdminRole)
	adminA := newUser(t, a.AdminRole)

	aliceA, bobA, bobB := alice.connect(t, a.DB), bob.connect(t, a.DB), bob.connect(t, b.DB)
	aliceID, bobID, bobBID := ping(t, aliceA), ping(t, bobA), ping(t, bobB)
	for _, x := range []struct {
		conn *pgx.Conn
		id   uuid.UUID
	}{{aliceA, aliceID}, {bobA, bobID}, {bobB, bobBID}} {
		if row := waitDone(t, x.conn, x.id); row.Status != "succeeded" {
			t.Fatalf("ping %s finished %s (error %v)", x.id, row.Status, row.Error)
		}
	}
	visible := func(conn *pgx.Conn) int { return testenv.Query[int](t, conn, `SELECT count(*) FROM dataenv.requests`) }
	if n := visible(aliceA); n != 1 {
		t.Errorf("alice sees %d requests in satellite A, want her own 1", n)
	}
	if n := visible(bobA); n != 1 {
		t.Errorf("bob sees %d requests in satellite A, want his own 1", n)
	}
	if n := visible(adminA.connect(t, a.DB)); n != 2 {
		t.Errorf("A's admin sees %d requests in satellite A, want 2", n)
	}
	if _, err := aliceA.Exec(context.Background(), `SELECT dataenv.cancel($1)`, bobID); err == nil || !strings.Contains(err.Error(), "no request") {
		t.Errorf("alice cancelling bob's request: %v, want no such request", err)
	}

	// The session holds the envelope's dblink connection to the control database now; alice can
	// neither use it nor read the credentials behind it.
	for _, q := range []string{
		`SELECT * FROM dataenv.dblink('dataenv_control', 'SELECT 1') AS t(x int)`,
		`SELECT * FROM dataenv.dblink_connect('x', 'dbname=postgres')`,
		`SELECT * FROM dataenv.control_exec('SELECT 1::text')`,
		`SELECT password FROM dataenv.control_credentials`,
	} {
		_, err := aliceA.Exec(context.Background(), q)
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("alice in satellite A: %s: %v, want permission denied", q, err)
		}
	}
	// alice is a user of A only: B refuses her at insert time.
	aliceB := alice.connect(t, b.DB)
	if _, err := aliceB.Exec(context.Background(), `SELECT dataenv.ping()`); err == nil {
		t.Errorf("alice made a request in satellite B, where she has no role")
	}
	// carol is a dataenv user and admin of the control and admin of B, and nothing in A.
	carolA := carol.connect(t, a.DB)
	_, err := carolA.Exec(context.Background(), `SELECT dataenv.ping()`)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("carol (control dataenv_user/admin) making a request in satellite A: %v, want permission denied", err)
	}
	if n := visible(carol.connect(t, b.DB)); n != 1 {
		t.Errorf("B's admin carol sees %d requests in B, want bob's 1", n)
	}
	// The control's views hold envelopes, which no user sees there.
	if n := visible(carol.connect(t, c.DB)); n != 3 {
		t.Logf("control admin sees %d rows in the control (envelopes)", n)
	}
	if n := visible(newUser(t, "dataenv_user").connect(t, c.DB)); n != 0 {
		t.Errorf("a control dataenv user sees %d envelopes in the control database", n)
	}
}
