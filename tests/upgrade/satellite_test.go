package upgrade_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/testenv"
)

// satelliteRows is what a satellite's reinstall must keep: its identity and its requests.
const satelliteRows = `SELECT (SELECT id::text FROM dataenv.installation) || ' ' ||
	(SELECT count(*) FROM dataenv.requests)::text || ' ' ||
	(SELECT count(*) FILTER (WHERE status = 'succeeded') FROM dataenv.requests)::text`

// checkSatelliteOnUpgradedControl: the last release predates satellites, so a control upgraded
// from it (controlDB, served by this tree's sidecar) is what the first satellites meet. One
// installs against it and serves a ping and fork changes on the release's workspace ws (requests
// that need no DuckDB runner); `dataenv install` run again over it keeps its identity and rows,
// and it still serves requests.
func checkSatelliteOnUpgradedControl(t *testing.T, control *pgx.Conn, controlDB, ws string) {
	t.Helper()
	db := pg.CreateDatabase(t)
	installSatelliteWithBinary(t, db, controlDB)
	login := testenv.QueryText(t, control, `SELECT login_role::text FROM dataenv.satellites
		WHERE database_oid = (SELECT oid FROM pg_database WHERE datname = $1)`, db)
	sat := pg.Connect(t, db)
	roles := testenv.QueryText(t, sat, `SELECT user_role || ',' || admin_role FROM dataenv.satellite_roles()`)
	userRole, adminRole, _ := strings.Cut(roles, ",")
	pg.DropRolesAtCleanup(t, login, userRole, adminRole)

	succeed(t, sat, testenv.Query[uuid.UUID](t, sat, `SELECT dataenv.ping()`))
	fork := "ups-" + uuid.NewString()[:8]
	succeed(t, sat, testenv.Query[uuid.UUID](t, sat, `SELECT dataenv.create_fork($1, $2)`, ws, fork))
	if n := testenv.Query[int](t, control, `SELECT count(*) FROM dataenv.workspaces WHERE id = $1`, fork); n != 1 {
		t.Fatalf("the fork made from the satellite is not a workspace of the control (%d rows)", n)
	}
	succeed(t, sat, testenv.Query[uuid.UUID](t, sat, `SELECT dataenv.drop_fork($1)`, fork))

	before := testenv.QueryText(t, sat, satelliteRows)
	installSatelliteWithBinary(t, db, controlDB)
	if after := testenv.QueryText(t, sat, satelliteRows); after != before {
		t.Fatalf("reinstalling the satellite changed its identity or rows: before %q, after %q", before, after)
	}
	succeed(t, sat, testenv.Query[uuid.UUID](t, sat, `SELECT dataenv.ping()`))
}

func installSatelliteWithBinary(t *testing.T, db, controlDB string) {
	t.Helper()
	out, err := exec.Command(mustBinary(t), "install", "--dsn", pg.DSN(db), "--control-database", controlDB).CombinedOutput()
	if err != nil {
		t.Fatalf("dataenv install of a satellite in %s over the upgraded control: %v\n%s", db, err, out)
	}
}
