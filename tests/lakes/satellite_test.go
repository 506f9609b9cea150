package lakes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

// satellite is a satellite installation (docs/satellites.md) in a database of its own on the
// env's cluster, registered with the env's control installation.
type satellite struct {
	db       string
	conn     *pgx.Conn // the installer's (a superuser: an administrator of the satellite)
	userRole string
}

func (e *env) satellite() satellite {
	e.t.Helper()
	ctx := context.Background()
	s := satellite{db: pg.CreateDatabase(e.t)}
	s.conn = pg.Connect(e.t, s.db)
	if _, err := install.InstallSatellite(ctx, s.conn, install.SatelliteOptions{ControlDatabase: e.conn.Config().Database,
		Logger: slog.New(slog.DiscardHandler)}); err != nil {
		e.t.Fatalf("install a satellite in %s: %v", s.db, err)
	}
	var admin string
	if err := s.conn.QueryRow(ctx, `SELECT user_role, admin_role FROM dataenv.satellite_roles()`).Scan(&s.userRole, &admin); err != nil {
		e.t.Fatal(err)
	}
	login := queryString(e.t, e.conn, `SELECT login_role::text FROM dataenv.satellites
		WHERE database_oid = (SELECT oid FROM pg_database WHERE datname = $1)`, s.db)
	pg.DropRolesAtCleanup(e.t, s.userRole, admin, login)
	return s
}

// satelliteUser connects to the satellite as a new user of it (and of the control installation),
// a member of the control's workspaces listed.
func (e *env) satelliteUser(s satellite, workspaces ...string) *pgx.Conn {
	e.t.Helper()
	name, pw := pg.CreateRole(e.t, fmt.Sprintf("LOGIN IN ROLE dataenv_user, %s", pgx.Identifier{s.userRole}.Sanitize()))
	for _, w := range workspaces {
		mustExec(e.t, e.conn, `SELECT dataenv.grant_workspace($1, $2)`, w, name)
	}
	return pg.ConnectAs(e.t, name, pw, s.db)
}

func satelliteRequest(t *testing.T, conn *pgx.Conn, sql string, args ...any) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return id
}

// A run made in a satellite runs in the control's workspace for a member of it, with its result
// in the satellite's row; a non-member, and a workspace the control does not have, are refused
// with the control's own text.
func TestSatelliteRunFollowsControlWorkspaceMembership(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	e.startSidecar()
	s := e.satellite()
	member, stranger := e.satelliteUser(s, "prod"), e.satelliteUser(s)

	id := satelliteRequest(t, member, `SELECT dataenv.run('prod', 'SELECT 42 AS answer')`)
	row := sidecartest.Wait(t, member, id, 120*time.Second)
	var res jobResult
	if err := json.Unmarshal(row.Result, &res); err != nil || row.Status != "succeeded" || res.rowsText() != "42" {
		t.Fatalf("a member's run from the satellite: %s %s %s (%v)", row.Status, deref(row.Error), row.Result, err)
	}
	// Its envelope names the kind, so the dispatcher ran it as a job, and the requester and the
	// workspace, which it counted against (docs/satellites.md). The envelope's outcome is written
	// after the satellite's: wait for it in the control.
	sidecartest.Wait(t, e.conn, id, 120*time.Second)
	if got := queryString(t, e.conn, `SELECT status || ' ' || (args->>'kind') || ' ' || (args->>'workspace') FROM dataenv.requests WHERE id = $1`, id); got != "succeeded run prod" {
		t.Fatalf("the run's envelope: %s, want succeeded run prod", got)
	}
	requester := queryString(t, member, `SELECT requested_by::text FROM dataenv.requests WHERE id = $1`, id)
	if got := queryString(t, e.conn, `SELECT args->>'requested_by' FROM dataenv.requests WHERE id = $1`, id); got != requester {
		t.Fatalf("the run's envelope names requester %q, its row %q", got, requester)
	}
	for who, c := range map[string]struct {
		conn *pgx.Conn
		sql  string
		want string
	}{
		"a non-member":        {stranger, `SELECT dataenv.run('prod', 'SELECT 42 AS answer')`, "is not a member of workspace"},
		"a missing workspace": {member, `SELECT dataenv.run('nope', 'SELECT 1')`, "no workspace named"},
	} {
		row := sidecartest.Wait(t, c.conn, satelliteRequest(t, c.conn, c.sql), 120*time.Second)
		if row.Status != "failed" || !strings.Contains(deref(row.Error), c.want) || row.Result != nil {
			t.Errorf("%s: %s %s %s, want failed with %q", who, row.Status, deref(row.Error), row.Result, c.want)
		}
	}
	if got := execErr(t, member, `SELECT dataenv.run('', 'SELECT 1')`); !strings.Contains(got, "workspace is required") {
		t.Errorf("an empty workspace at insert: %s", got)
	}
}

// A sidecar killed (SIGKILL at a crash point) after a satellite's append was written and before
// it was recorded: the restarted sidecar finishes the request once, in the satellite's row, and
// the rows are appended once.
func TestSatelliteMaterializeKilledAfterWriteAppendsOnce(t *testing.T) {
	e := newEnv(t)
	storageKinds[0].setup(t, e)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	s := e.satellite()
	e.startSidecar("DATAENV_CRASH_AT=job.materialize.after_write", "DATAENV_CRASH_MARKER_DIR="+t.TempDir())
	id := satelliteRequest(t, s.conn, `SELECT dataenv.materialize('prod', 'ducklake://main/t', 'SELECT range AS x FROM range(7)', 'append')`)
	if err := e.sidecar.WaitExit(60 * time.Second); err != nil {
		t.Fatalf("the sidecar did not die at the crash point: %v", err)
	}
	e.startSidecar()
	if row := sidecartest.Wait(t, s.conn, id, 120*time.Second); row.Status != "succeeded" {
		t.Fatalf("the satellite's materialize after the restart: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text || ' ' || max(row_count) FROM dataenv.materializations WHERE request_id = $1`, id); got != "1 7" {
		t.Fatalf("materialization rows: %s", got)
	}
	sidecartest.Wait(t, e.conn, id, 120*time.Second) // the envelope's outcome follows the satellite's
	if got := queryString(t, e.conn, `SELECT status || ' ' || (attempts > 1)::text FROM dataenv.requests WHERE id = $1`, id); got != "succeeded true" {
		t.Fatalf("the envelope: %s, want succeeded after a second attempt", got)
	}
	if got := e.run("prod", attachMain+"SELECT count(*) FROM dl.t").rowsText(); got != "7" {
		t.Fatalf("table rows: %s", got)
	}
}

// dataenv.cancel in a satellite of a running job reaches its envelope in the control: the job's
// runner is stopped and both rows end cancelled.
func TestSatelliteCancelStopsItsRunningJob(t *testing.T) {
	e := newEnv(t)
	e.startSidecar("DATAENV_JOB_WARM_SPARES=0") // so that every process under the sidecar is the job's
	e.workspace("prod", "")
	s := e.satellite()
	member := e.satelliteUser(s, "prod")
	id := satelliteRequest(t, member, `SELECT dataenv.run('prod', $1)`, `SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3`)
	sidecarPid := e.sidecar.Pid()
	deadline := time.Now().Add(60 * time.Second)
	for len(descendants(sidecarPid)) == 0 || queryString(t, member, `SELECT status FROM dataenv.requests WHERE id = $1`, id) != "running" {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not start: %s", queryString(t, member, `SELECT status FROM dataenv.requests WHERE id = $1`, id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustExec(t, member, `SELECT dataenv.cancel($1)`, id)
	if row := sidecartest.Wait(t, member, id, 120*time.Second); row.Status != "cancelled" {
		t.Fatalf("the cancelled job in the satellite is %s (%s)", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT status FROM dataenv.wait($1, '60 s')`, id); got != "cancelled" {
		t.Fatalf("its envelope is %s", got)
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(descendants(sidecarPid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the cancelled job still alive: %v", descendants(sidecarPid))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// create_fork and drop_fork made in a satellite act on the control's workspaces under the
// control's rights for the satellite's caller: a member of the parent forks it and, as the
// fork's owner, drops it; another user is refused both.
func TestSatelliteForksFollowControlWorkspaceRights(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	e.startSidecar()
	s := e.satellite()
	member, stranger := e.satelliteUser(s, "prod"), e.satelliteUser(s)
	wait := func(conn *pgx.Conn, sql string, args ...any) sidecartest.Row {
		t.Helper()
		return sidecartest.Wait(t, conn, satelliteRequest(t, conn, sql, args...), 120*time.Second)
	}
	if row := wait(member, `SELECT dataenv.create_fork('prod', 'dev')`); row.Status != "succeeded" {
		t.Fatalf("a member's create_fork from the satellite: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT coalesce(string_agg(id || '<' || parent, ','), '') FROM dataenv.workspaces WHERE id = 'dev'`); got != "dev<prod" {
		t.Fatalf("the fork in the control: %q", got)
	}
	if row := wait(stranger, `SELECT dataenv.create_fork('prod', 'dev2')`); row.Status != "failed" || !strings.Contains(deref(row.Error), "is not a member of workspace") {
		t.Errorf("a non-member's create_fork: %s %s", row.Status, deref(row.Error))
	}
	if row := wait(stranger, `SELECT dataenv.drop_fork('dev')`); row.Status != "failed" || !strings.Contains(deref(row.Error), "permission denied") {
		t.Errorf("a non-member's drop_fork: %s %s", row.Status, deref(row.Error))
	}
	if row := wait(member, `SELECT dataenv.drop_fork('dev')`); row.Status != "succeeded" {
		t.Fatalf("the owner's drop_fork from the satellite: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.workspaces WHERE id IN ('dev', 'dev2')`); got != "0" {
		t.Fatalf("workspaces left in the control: %s", got)
	}
}
