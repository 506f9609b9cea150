package satellites_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// A satellite database whose owner set session defaults for it (another role, read only, a 1 ms
// statement timeout) still has its requests served: the sidecar's sessions in it pin their own
// settings, which outrank a database's defaults. Unpinned, every envelope of that database
// failed as a passing fault and was retried until its attempts ran out.
func TestSatelliteDatabaseDefaultsDoNotSteerTheSidecar(t *testing.T) {
	c := newControl(t)
	s := newSatellite(t, c)
	other, _ := pg.CreateRole(t, "NOLOGIN")
	super := pg.Connect(t, "postgres")
	// Cleanups registered earlier (the roles dropped in the database) run after this one and need it writable.
	t.Cleanup(func() { testenv.MustExec(t, super, `ALTER DATABASE `+pgx.Identifier{s.DB}.Sanitize()+` RESET ALL`) })
	for _, d := range []string{`role = ` + pgx.Identifier{other}.Sanitize(), `default_transaction_read_only = on`,
		`statement_timeout = '1ms'`, `lock_timeout = '1ms'`, `default_transaction_isolation = serializable`} {
		testenv.MustExec(t, super, `ALTER DATABASE `+pgx.Identifier{s.DB}.Sanitize()+` SET `+d)
	}
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	waitStreaming(t, c.Conn)

	conn := pg.Connect(t, s.DB) // the test's own session undoes the defaults
	testenv.MustExec(t, conn, `SET ROLE NONE; SET statement_timeout = 0; SET lock_timeout = 0; SET default_transaction_read_only = off;
		SET default_transaction_isolation = 'read committed'`)
	if who := testenv.QueryText(t, pg.Connect(t, s.DB), `SELECT current_user`); who != other {
		t.Fatalf("a superuser session in the satellite database runs as %s, want %s: the defaults did not take", who, other)
	}
	for range 3 {
		id := ping(t, conn)
		if row := waitDone(t, conn, id); row.Status != "succeeded" || string(row.Result) != `{"pong": true}` {
			t.Errorf("ping %s finished %s with %s (error %v)", id, row.Status, row.Result, row.Error)
		}
	}
}
