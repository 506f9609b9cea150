package upgrade_test

import (
	"context"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/migrations"
	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// snapshot counts what an upgrade must keep.
type snapshot struct {
	Requests, Workspaces, Datatables, ForkCopies, ManagedDatabases, Clusters int
}

const snapshotSQL = `SELECT
	(SELECT count(*) FROM dataenv.requests),
	(SELECT count(*) FROM dataenv.workspaces),
	(SELECT count(*) FROM dataenv.datatables),
	(SELECT count(*) FROM dataenv.fork_copies),
	(SELECT count(*) FROM dataenv.managed_databases),
	(SELECT count(*) FROM dataenv.clusters)`

func take(t *testing.T, conn *pgx.Conn) snapshot {
	t.Helper()
	var s snapshot
	if err := conn.QueryRow(context.Background(), snapshotSQL).Scan(&s.Requests, &s.Workspaces,
		&s.Datatables, &s.ForkCopies, &s.ManagedDatabases, &s.Clusters); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

// TestUpgradeFromLastReleaseWithWorkInFlight: the last release is installed and does real work
// (a cluster set up, a managed database, a workspace with a datatable, a full_copy fork); its
// sidecar is killed with requests pending and one interrupted while it runs; this tree's
// install runs over it; the new sidecar finishes every unfinished request exactly once, keeps
// every row, and can drop what the release created.
func TestUpgradeFromLastReleaseWithWorkInFlight(t *testing.T) {
	db := pg.CreateDatabase(t)
	dsn := pg.DSN(db)
	conn := pg.Connect(t, db)
	t.Cleanup(func() { sidecartest.DropSlot(conn) })

	runRelease(t, "install", "--dsn", dsn)
	old := sidecartest.Start(t, sidecartest.Options{DSN: dsn, Binary: releaseBin})

	prefix := pg.NamePrefix(t)
	app, repl := "dataenv_"+prefix+"app", "dataenv_"+prefix+"repl"
	pg.DropRolesAtCleanup(t, app, repl)
	testenv.MustExec(t, conn, `SELECT dataenv.update_cluster('instance', app_role => $1, replication_role => $2)`, app, repl)
	succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.setup_cluster('instance')`))
	parent := prefix + "parent"
	succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.create_database('instance', $1)`, parent))
	fillParent(t, parent)
	ws, fork := "up-"+uuid.NewString()[:8], "upf-"+uuid.NewString()[:8]
	testenv.MustExec(t, conn, `SELECT dataenv.create_workspace($1)`, ws)
	testenv.MustExec(t, conn, `SELECT dataenv.add_datatable($1, 'app', 'instance', $2)`, ws, parent)
	succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.create_fork($1, $2, '{"app": "full_copy"}')`, ws, fork))
	oldSpareFork := "ups-" + uuid.NewString()[:8]
	schemaOnlyFork(t, conn, ws, oldSpareFork) // the release's refresh makes a template and a spare

	// Work in flight: a fork and a database whose requests the release's sidecar may have
	// claimed when it is killed, and pings it never saw.
	fork2 := "upg-" + uuid.NewString()[:8]
	inFlight := []uuid.UUID{
		testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.create_fork($1, $2, '{"app": "full_copy"}')`, ws, fork2),
		testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.create_database('instance', $1)`, prefix+"second"),
	}
	old.Kill()
	for range 10 {
		inFlight = append(inFlight, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.ping()`))
	}
	before := take(t, conn)

	out, err := exec.Command(mustBinary(t), "install", "--dsn", dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("dataenv install over release %s: %v\n%s", release[:12], err, out)
	}
	t.Logf("install over the release:\n%s", out)
	if after := take(t, conn); after != before {
		t.Fatalf("the upgrade changed what it must keep: before %+v, after %+v", before, after)
	}
	files, err := fs.Glob(migrations.FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM dataenv.schema_migrations`); n != len(files) {
		t.Fatalf("%d migrations recorded after the upgrade, this tree has %d", n, len(files))
	}

	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	for _, id := range inFlight {
		succeed(t, conn, id)
	}
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM pg_database WHERE datname = $1`, names.ForkDatabase(fork2, "app")); n != 1 {
		t.Fatalf("the interrupted fork has %d copies, want 1", n)
	}
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM pg_database WHERE datname LIKE 'dataenv\_tmp\_%'`); n != 0 {
		t.Fatalf("%d staging databases left after the interrupted requests", n)
	}
	checkSpareOfTheRelease(t, conn, ws)
	checkSatelliteOnUpgradedControl(t, conn, db, ws)
	// What the release made is still dataenv's to drop, with the new sidecar.
	for _, f := range []string{fork, fork2} {
		succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.drop_fork($1)`, f))
		if n := testenv.Query[int](t, conn, `SELECT count(*) FROM pg_database WHERE datname = $1`, names.ForkDatabase(f, "app")); n != 0 {
			t.Fatalf("drop_fork %s left its copy", f)
		}
	}
	succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.drop_database('instance', $1)`, prefix+"second"))
	for _, f := range []string{oldSpareFork, newSpareFork} {
		succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.drop_fork($1)`, f))
	}
	testenv.MustExec(t, conn, `SELECT dataenv.drop_workspace($1)`, ws) // its templates and spares go too
	succeed(t, conn, testenv.Query[uuid.UUID](t, conn, `SELECT id FROM dataenv.requests WHERE kind = 'refresh_schema_template'
		AND args->>'workspace' = $1 ORDER BY created_at DESC LIMIT 1`, ws))
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM pg_roles WHERE rolname LIKE 'dataenv\_spare\_%'`); n != 0 {
		t.Fatalf("%d spare roles left after the workspace was dropped", n)
	}
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM dataenv.requests WHERE status NOT IN ('succeeded')`); n != 0 {
		t.Fatalf("%d requests did not succeed", n)
	}
}

// newSpareFork is the fork checkSpareOfTheRelease makes after the upgrade.
var newSpareFork = "upn-" + uuid.NewString()[:8]

// checkSpareOfTheRelease: a spare the release made is taken after the upgrade by a fork, which ends
// up owning its objects through the fork's role (whether the release gave the spare a role of its
// own or left it to the template's owner); the refresh that fork asks for makes the next spare,
// with a role.
func checkSpareOfTheRelease(t *testing.T, conn *pgx.Conn, ws string) {
	t.Helper()
	old := testenv.Query[string](t, conn, `SELECT database FROM dataenv.schema_templates
		WHERE workspace = $1 AND spare_of IS NOT NULL AND state = 'ready'`, ws)
	if took := schemaOnlyFork(t, conn, ws, newSpareFork); took != old {
		t.Fatalf("the fork after the upgrade took spare %q, want the release's %q", took, old)
	}
	role := testenv.Query[string](t, conn, `SELECT role FROM dataenv.workspace_roles WHERE workspace = $1`, newSpareFork)
	c := pg.Connect(t, names.ForkDatabase(newSpareFork, "app"))
	if n := testenv.Query[int](t, c, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace
		AND pg_get_userbyid(relowner) <> $1`, role); n != 0 {
		t.Fatalf("%d relations of the copy made from the release's spare are not owned by the fork's role %s", n, role)
	}
	_ = c.Close(context.Background())
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM dataenv.schema_templates
		WHERE workspace = $1 AND spare_of IS NOT NULL AND state = 'ready' AND role IS NOT NULL`, ws); n != 1 {
		t.Fatalf("%d spares with a role after the refresh that followed the upgrade, want 1", n)
	}
}

// schemaOnlyFork makes a schema_only fork of ws's datatable app and waits for the refresh of the
// schema template it asks for; it returns the spare the copy took ("" for none).
func schemaOnlyFork(t *testing.T, conn *pgx.Conn, ws, fork string) string {
	t.Helper()
	id := testenv.Query[uuid.UUID](t, conn, `SELECT dataenv.create_fork($1, $2, '{"app": "schema_only"}')`, ws, fork)
	succeed(t, conn, id)
	var spare, refresh string
	if err := conn.QueryRow(context.Background(), `SELECT coalesce(d->'fidelity'->'schema_template'->>'spare', ''),
		coalesce(d->'fidelity'->'schema_template'->>'request', '')
		FROM dataenv.requests r, jsonb_array_elements(r.result->'datatables') d WHERE r.id = $1`, id).Scan(&spare, &refresh); err != nil {
		t.Fatalf("the result of fork %s: %v", fork, err)
	}
	if refresh != "" {
		succeed(t, conn, uuid.MustParse(refresh))
	}
	return spare
}

// fillParent gives the parent database a table with rows, made as the superuser.
func fillParent(t *testing.T, db string) {
	t.Helper()
	c := pg.Connect(t, db)
	testenv.MustExec(t, c, `CREATE TABLE customers (id int PRIMARY KEY, name text)`)
	testenv.MustExec(t, c, `INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 100) g`)
}

func runRelease(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(releaseBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("release %s: dataenv %s: %v\n%s", release[:12], strings.Join(args, " "), err, out)
	}
}

func mustBinary(t *testing.T) string {
	t.Helper()
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func succeed(t *testing.T, conn *pgx.Conn, id uuid.UUID) {
	t.Helper()
	r := sidecartest.Wait(t, conn, id, 3*time.Minute)
	if r.Status != "succeeded" {
		e := ""
		if r.Error != nil {
			e = *r.Error
		}
		t.Fatalf("request %s (%s): %s: %s", id, r.Kind, r.Status, e)
	}
}
