package satellites_test

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

func uninstall(dsn string, force bool) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return install.UninstallWith(ctx, conn, install.UninstallOptions{Force: force, Logger: slog.New(slog.DiscardHandler)})
}

// Uninstalling a satellite removes only it; removing the control while satellites exist is
// refused unless forced, and afterwards the satellites fail new requests with "control
// installation unavailable" while their status view warns and returns no rows.
func TestRemovalOrderSatellitesFirstControlLast(t *testing.T) {
	c := newControl(t)
	gone, kept := newSatellite(t, c), newSatellite(t, c)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	if err := uninstall(gone.DSN, false); err != nil {
		t.Fatalf("uninstall a satellite: %v", err)
	}
	if n := testenv.Query[int](t, gone.Conn, `SELECT count(*) FROM pg_namespace WHERE nspname = 'dataenv'`); n != 0 {
		t.Fatalf("the uninstalled satellite still has its schema")
	}
	if n := testenv.Query[int](t, c.Conn, `SELECT count(*) FROM dataenv.satellites`); n != 1 {
		t.Fatalf("%d satellites registered after one of two was uninstalled, want 1", n)
	}
	for _, conn := range []*pgx.Conn{kept.Conn, c.Conn} {
		if row := waitDone(t, conn, ping(t, conn)); row.Status != "succeeded" {
			t.Fatalf("ping after a satellite's removal finished %s (error %v)", row.Status, row.Error)
		}
	}

	err := uninstall(c.DSN, false)
	if err == nil || !strings.Contains(err.Error(), kept.DB) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("uninstall of the control with a satellite: %v, want a refusal naming %s and --force", err, kept.DB)
	}
	if row := waitDone(t, kept.Conn, ping(t, kept.Conn)); row.Status != "succeeded" {
		t.Fatalf("ping after the refused removal finished %s (error %v)", row.Status, row.Error)
	}
	if err := uninstall(c.DSN, true); err != nil {
		t.Fatalf("forced uninstall of the control: %v", err)
	}
	_, err = kept.Conn.Exec(context.Background(), `SELECT dataenv.ping()`)
	if err == nil || !strings.Contains(err.Error(), "control installation unavailable") {
		t.Fatalf("request in a satellite of a removed control: %v, want control installation unavailable", err)
	}
	// A fresh session (no dblink connection kept) fails the same way.
	_, err = pg.Connect(t, kept.DB).Exec(context.Background(), `SELECT dataenv.ping()`)
	if err == nil || !strings.Contains(err.Error(), "control installation unavailable") {
		t.Fatalf("request in a new session of a satellite of a removed control: %v, want control installation unavailable", err)
	}
	if n := testenv.Query[int](t, kept.Conn, `SELECT count(*) FROM dataenv.requests WHERE status = 'pending'`); n != 0 {
		t.Fatalf("%d failed requests left rows behind", n)
	}
	var mu sync.Mutex
	var notices []string
	cfg, err := pgx.ParseConfig(kept.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { mu.Lock(); notices = append(notices, n.Message); mu.Unlock() }
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if n := testenv.Query[int](t, conn, `SELECT count(*) FROM dataenv.sidecar_status`); n != 0 {
		t.Fatalf("status view of a satellite without control returned %d rows", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) == 0 || !strings.Contains(notices[0], "control installation unavailable") {
		t.Fatalf("status view warnings %q, want control installation unavailable", notices)
	}
}

// The readiness protocol, not release strings, decides: a satellite is refused without a
// control, with a control that predates satellites (preSatelliteRelease: upgrade it first), or with
// one whose protocols do not include the satellite's; an upgraded control that serves newer
// protocols as well keeps the older satellite working.
func TestSatelliteInstallFollowsTheReadinessProtocol(t *testing.T) {
	db := pg.CreateDatabase(t)
	other := pg.CreateDatabase(t)
	err := tryInstallSatellite(pg.DSN(db), other)
	if err == nil || !strings.Contains(err.Error(), "no dataenv control installation") {
		t.Fatalf("satellite without a control: %v, want refused", err)
	}
	if n := testenv.Query[int](t, pg.Connect(t, db), `SELECT count(*) FROM pg_namespace WHERE nspname = 'dataenv'`); n != 0 {
		t.Fatalf("a refused satellite install left a dataenv schema")
	}

	// A release's control from before satellites: it has no satellite protocol.
	bin, err := sidecartest.BuildRelease(preSatelliteRelease)
	if err != nil {
		t.Fatal(err)
	}
	ctrlDB := pg.CreateDatabase(t)
	runCLI(t, bin, "install", "--dsn", pg.DSN(ctrlDB))
	ctrl := pg.Connect(t, ctrlDB)
	t.Cleanup(func() { sidecartest.DropSlot(ctrl) })
	err = tryInstallSatellite(pg.DSN(db), ctrlDB)
	if err == nil || !strings.Contains(err.Error(), "upgrade it first") {
		t.Fatalf("satellite with a control from before satellites: %v, want refused with upgrade the control", err)
	}
	// Upgraded with this tree: the satellite installs.
	sidecartest.Install(t, pg.DSN(ctrlDB))
	c := control{DB: ctrlDB, DSN: pg.DSN(ctrlDB), Conn: ctrl}
	s := installSatellite(t, c, db)

	// A control that moved past this satellite's protocol refuses new satellites of it.
	testenv.MustExec(t, ctrl, `CREATE OR REPLACE FUNCTION dataenv.satellite_protocols(OUT min_version integer, OUT max_version integer)
		LANGUAGE sql IMMUTABLE AS $$ SELECT 2, 3 $$`)
	err = tryInstallSatellite(pg.DSN(other), ctrlDB)
	if err == nil || !strings.Contains(err.Error(), "serves satellite protocols 2 to 3") {
		t.Fatalf("satellite of protocol 1 with a control serving 2-3: %v, want refused", err)
	}
	// One that serves 1 and newer keeps the installed satellite running.
	testenv.MustExec(t, ctrl, `CREATE OR REPLACE FUNCTION dataenv.satellite_protocols(OUT min_version integer, OUT max_version integer)
		LANGUAGE sql IMMUTABLE AS $$ SELECT 1, 2 $$`)
	sidecartest.Start(t, sidecartest.Options{DSN: c.DSN})
	if row := waitDone(t, s.Conn, ping(t, s.Conn)); row.Status != "succeeded" {
		t.Fatalf("ping of a protocol 1 satellite with a control serving 1-2 finished %s (error %v)", row.Status, row.Error)
	}
	var ready bool
	var lo, hi int
	if err := s.Conn.QueryRow(context.Background(), `SELECT control_protocol_min, control_protocol_max, coalesce(ready, false) FROM dataenv.sidecar_status`).Scan(&lo, &hi, &ready); err != nil {
		t.Fatal(err)
	}
	if lo != 1 || hi != 2 {
		t.Fatalf("satellite status shows control protocols %d-%d, want 1-2", lo, hi)
	}
}

// preSatelliteRelease is the last release (a stop that landed) before satellite installations:
// fixed, unlike ../upgrade/RELEASE, which moves to each new release.
const preSatelliteRelease = "c229981b9162f063f87d43f67e1f489b9c3d8e6e"

func runCLI(t *testing.T, bin string, args ...string) {
	t.Helper()
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
	}
}

// Every function, table and view of a satellite's dataenv schema (but dblink's own) says what it
// is, and every SECURITY DEFINER function pins its search_path.
func TestSatelliteObjectsAreCommentedAndDefinersPinned(t *testing.T) {
	c := newControl(t)
	s := newSatellite(t, c)
	const ours = `NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')`
	if missing := testenv.QueryText(t, s.Conn, `SELECT string_agg(p.oid::regprocedure::text, ', ') FROM pg_proc p
		WHERE p.pronamespace = 'dataenv'::regnamespace AND `+ours+` AND obj_description(p.oid, 'pg_proc') IS NULL`); missing != "" {
		t.Errorf("satellite functions without COMMENT ON: %s", missing)
	}
	if unpinned := testenv.QueryText(t, s.Conn, `SELECT string_agg(p.oid::regprocedure::text, ', ') FROM pg_proc p
		WHERE p.pronamespace = 'dataenv'::regnamespace AND p.prosecdef AND `+ours+`
		  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)`); unpinned != "" {
		t.Errorf("satellite SECURITY DEFINER functions without search_path = pg_catalog, pg_temp: %s", unpinned)
	}
	if missing := testenv.QueryText(t, s.Conn, `SELECT string_agg(c.relname, ', ') FROM pg_class c
		WHERE c.relnamespace = 'dataenv'::regnamespace AND c.relkind IN ('r', 'v') AND c.relname <> 'schema_migrations'
		  AND obj_description(c.oid, 'pg_class') IS NULL`); missing != "" {
		t.Errorf("satellite tables and views without COMMENT ON: %s", missing)
	}
	if missing := testenv.QueryText(t, c.Conn, `SELECT string_agg(p.oid::regprocedure::text, ', ') FROM pg_proc p
		WHERE p.pronamespace = 'dataenv'::regnamespace AND p.proname LIKE '%satellite%' AND obj_description(p.oid, 'pg_proc') IS NULL`); missing != "" {
		t.Errorf("control satellite functions without COMMENT ON: %s", missing)
	}
}
