package pipeline_test

import (
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

// The control database's owner (the application's role, when dataenv is installed into the
// application's database) may set session defaults for every session in it. The sidecar's
// sessions there (its pool, the leader's, the gate's, the replication connection) pin their
// own settings, so a request still runs once and succeeds; unpinned, the sidecar ran as the
// chosen role and could not even read its schema version.
func TestControlDatabaseDefaultsDoNotSteerTheSidecar(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	other, _ := pg.CreateRole(t, "NOLOGIN")
	pg.HostileDefaults(t, pg.Connect(t, "postgres"), conn.Config().Database, other)
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	waitStreaming(t, conn) // conn predates the defaults
	id := newRequest(t, conn, "test_effects", `{}`)
	row := sidecartest.Wait(t, conn, id, 60*time.Second)
	if row.Status != "succeeded" || row.Attempts != 1 {
		t.Fatalf("request finished as %s after %d attempts (error %v), want succeeded after 1", row.Status, row.Attempts, row.Error)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects WHERE request_id = $1`, id); n != 2 {
		t.Fatalf("the request made %d effects, want 2", n)
	}
}
