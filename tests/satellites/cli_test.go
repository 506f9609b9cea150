package satellites_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// dataenvCmd runs the dataenv binary with args and returns its combined output and error.
func dataenvCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// The satellite lifecycle through the command a person runs: `dataenv install --control-database`
// installs a satellite (refused for a database with no control installation), running it again
// keeps the satellite's identity, `dataenv uninstall` of the control is refused while the
// satellite is registered and goes through with --force, and `dataenv uninstall` of the satellite
// removes it; with another satellite registered, --force removes the control and that
// satellite's requests fail with "control installation unavailable".
func TestSatelliteLifecycleThroughTheCommand(t *testing.T) {
	t.Parallel()
	c := newControl(t)
	nowhere := pg.CreateDatabase(t)
	if out, err := dataenvCmd(t, "install", "--dsn", pg.DSN(pg.CreateDatabase(t)), "--control-database", nowhere); err == nil {
		t.Fatalf("a satellite was installed against a database with no control installation:\n%s", out)
	}
	db := pg.CreateDatabase(t)
	if out, err := dataenvCmd(t, "install", "--dsn", pg.DSN(db), "--control-database", c.DB); err != nil {
		t.Fatalf("dataenv install --control-database: %v\n%s", err, out)
	}
	s := pg.Connect(t, db)
	id := testenv.QueryText(t, s, `SELECT id::text FROM dataenv.installation`)
	if out, err := dataenvCmd(t, "install", "--dsn", pg.DSN(db), "--control-database", c.DB); err != nil {
		t.Fatalf("dataenv install --control-database, again: %v\n%s", err, out)
	}
	if again := testenv.QueryText(t, s, `SELECT id::text FROM dataenv.installation`); again != id {
		t.Fatalf("a second install changed the satellite's identity: %s, then %s", id, again)
	}
	var roles []string
	for _, q := range []string{`SELECT user_role FROM dataenv.satellite_roles()`, `SELECT admin_role FROM dataenv.satellite_roles()`} {
		roles = append(roles, testenv.QueryText(t, s, q))
	}
	roles = append(roles, testenv.QueryText(t, c.Conn, `SELECT login_role FROM dataenv.satellites`))
	pg.DropRolesAtCleanup(t, roles...)

	out, err := dataenvCmd(t, "uninstall", "--dsn", c.DSN)
	if err == nil || !strings.Contains(out, db) {
		t.Fatalf("uninstall of a control with a satellite: %v, want a refusal naming %s\n%s", err, db, out)
	}
	if out, err := dataenvCmd(t, "uninstall", "--dsn", pg.DSN(db)); err != nil {
		t.Fatalf("dataenv uninstall of the satellite: %v\n%s", err, out)
	}
	if n := testenv.Query[int](t, s, `SELECT count(*)::int FROM pg_namespace WHERE nspname = 'dataenv'`); n != 0 {
		t.Fatal("the satellite's schema is still there")
	}
	if n := testenv.Query[int](t, c.Conn, `SELECT count(*)::int FROM dataenv.satellites`); n != 0 {
		t.Fatalf("%d registrations left in the control", n)
	}
	// A second satellite, then the control forced out from under it.
	other := pg.CreateDatabase(t)
	if out, err := dataenvCmd(t, "install", "--dsn", pg.DSN(other), "--control-database", c.DB); err != nil {
		t.Fatalf("dataenv install --control-database: %v\n%s", err, out)
	}
	o := pg.Connect(t, other)
	pg.DropRolesAtCleanup(t, testenv.QueryText(t, o, `SELECT user_role FROM dataenv.satellite_roles()`),
		testenv.QueryText(t, o, `SELECT admin_role FROM dataenv.satellite_roles()`),
		testenv.QueryText(t, c.Conn, `SELECT login_role FROM dataenv.satellites`))
	if out, err := dataenvCmd(t, "uninstall", "--dsn", c.DSN, "--force"); err != nil {
		t.Fatalf("dataenv uninstall --force of the control: %v\n%s", err, out)
	}
	_, err = o.Exec(t.Context(), `SELECT dataenv.ping()`)
	if err == nil || !strings.Contains(err.Error(), "control installation unavailable") {
		t.Fatalf("a ping in a satellite whose control was removed: %v, want \"control installation unavailable\"", err)
	}
}
