package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// HostileDefaults sets, through conn (a session of the database's owner or of a superuser),
// session defaults for every later session in database db that a database's owner may set and
// that would steer or stall a session that does not pin its own: act as role asRole, read only,
// a 1 ms statement and lock timeout, SERIALIZABLE, standard_conforming_strings off. It checks
// that a new superuser session there runs as asRole (the defaults took), and resets them at the
// test's cleanup (cleanups registered before this call, roles dropped in db say, then find the
// database writable). A test's own sessions opened after the call are made with ConnectPlain.
func (p *Postgres) HostileDefaults(t testing.TB, conn *pgx.Conn, db, asRole string) {
	t.Helper()
	name := pgx.Identifier{db}.Sanitize()
	t.Cleanup(func() {
		_ = p.admin(context.Background(), func(c *pgx.Conn) error {
			_, err := c.Exec(context.Background(), `ALTER DATABASE `+name+` RESET ALL`)
			return err
		})
	})
	for _, d := range []string{`role = ` + pgx.Identifier{asRole}.Sanitize(), `default_transaction_read_only = on`,
		`statement_timeout = '1ms'`, `lock_timeout = '1ms'`, `default_transaction_isolation = serializable`,
		`standard_conforming_strings = off`} {
		MustExec(t, conn, `ALTER DATABASE `+name+` SET `+d)
	}
	// The probe keeps the role default and overrides the timeouts: a 1 ms statement timeout
	// would cancel the probe itself on a busy machine.
	probe := p.connectWith(t, p.SuperUser, p.SuperPassword, db, map[string]string{"statement_timeout": "0", "lock_timeout": "0"})
	if who := QueryText(t, probe, `SELECT current_user`); who != asRole {
		t.Fatalf("testenv: a new superuser session in %s runs as %s, want %s: the defaults did not take", db, who, asRole)
	}
	_ = probe.Close(context.Background())
}

// plainSettings undo HostileDefaults. They go in the startup packet, which outranks a
// database's defaults from the first statement on: undone by SET, a 1 ms statement timeout can
// cancel the SET itself on a busy machine.
var plainSettings = map[string]string{
	"role": "none", "statement_timeout": "0", "lock_timeout": "0",
	"default_transaction_read_only": "off", "default_transaction_isolation": "read committed",
	"standard_conforming_strings": "on",
}

// ConnectPlain opens a superuser connection to db that HostileDefaults does not reach, closed
// at the test's cleanup: for a test's own sessions in a database with hostile defaults.
func (p *Postgres) ConnectPlain(t testing.TB, db string) *pgx.Conn {
	t.Helper()
	return p.connectWith(t, p.SuperUser, p.SuperPassword, db, plainSettings)
}
