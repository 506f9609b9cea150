package pipeline_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// The control database's owner (the application's role, when dataenv is installed into the
// application's database) may set session defaults for every session in it. The sidecar's
// sessions there (its pool, the leader's, the gate's, the replication connection) pin their
// own settings, so a request still runs once and succeeds; unpinned, a read-only default or a
// 1 ms statement timeout made every attempt fail as a passing fault.
func TestControlDatabaseDefaultsDoNotSteerTheSidecar(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	other, _ := pg.CreateRole(t, "NOLOGIN")
	db := conn.Config().Database
	super := pg.Connect(t, "postgres")
	t.Cleanup(func() { mustExec(t, super, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` RESET ALL`) })
	for _, d := range []string{`role = ` + pgx.Identifier{other}.Sanitize(), `default_transaction_read_only = on`,
		`statement_timeout = '1ms'`, `lock_timeout = '1ms'`, `default_transaction_isolation = serializable`} {
		mustExec(t, super, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET `+d)
	}
	if who := testenv.QueryText(t, pg.Connect(t, db), `SELECT current_user`); who != other {
		t.Fatalf("a new superuser session in the control database runs as %s, want %s: the defaults did not take", who, other)
	}
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
