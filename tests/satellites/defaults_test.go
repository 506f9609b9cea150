package satellites_test

import (
	"testing"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

// A satellite database whose owner set session defaults for it (another role, read only, a 1 ms
// statement timeout, ...) still has its requests served: the sidecar's sessions in it pin their
// own settings, which outrank a database's defaults. Unpinned, every envelope of that database
// failed as a passing fault and stayed pending.
func TestSatelliteDatabaseDefaultsDoNotSteerTheSidecar(t *testing.T) {
	c := newControl(t)
	s := newSatellite(t, c)
	other, _ := pg.CreateRole(t, "NOLOGIN")
	pg.HostileDefaults(t, pg.Connect(t, "postgres"), s.DB, other)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	waitStreaming(t, c.Conn)

	conn := pg.ConnectPlain(t, s.DB)
	for range 3 {
		id := ping(t, conn)
		if row := waitDone(t, conn, id); row.Status != "succeeded" || string(row.Result) != `{"pong": true}` {
			t.Errorf("ping %s finished %s with %s (error %v)", id, row.Status, row.Result, row.Error)
		}
	}
}
