// Package lifecycle_test proves the lifecycle of workspaces end to end: protection
// (dataenv.protect_workspace) and fork expiry (create_fork's expires_in, dataenv.set_fork_expiry,
// dataenv.set_workspace_policy, the leader's sweep), with SQL in a real control database and the
// real dataenv sidecar binary.
package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}

// sweepInterval is the tests' fork expiry sweep: short, so that expiries are acted on soon.
const sweepInterval = "200ms"

// env is one test's installation: a control database with dataenv installed, a running sidecar
// sweeping for expired forks every sweepInterval, and two dataenv users: owner creates the
// workspaces, member is granted them.
type env struct {
	t       *testing.T
	ctx     context.Context
	db, dsn string
	sql     *pgx.Conn // superuser (a dataenv administrator)
	owner   user
	member  user
	sidecar *sidecartest.Process
}

type user struct {
	name string
	conn *pgx.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background()}
	e.db = pg.CreateDatabase(t)
	e.dsn = pg.DSN(e.db)
	sidecartest.Install(t, e.dsn)
	e.sql = pg.Connect(t, e.db)
	t.Cleanup(func() { sidecartest.DropSlot(e.sql) })
	e.owner, e.member = e.newUser(), e.newUser()
	e.sidecar = sidecartest.Start(t, sidecartest.Options{DSN: e.dsn, Args: []string{"--fork-expiry-interval", sweepInterval}})
	return e
}

func (e *env) newUser() user {
	e.t.Helper()
	name, pw := pg.CreateRole(e.t, "LOGIN IN ROLE dataenv_user")
	return user{name: name, conn: pg.ConnectAs(e.t, name, pw, e.db)}
}

func wsID(kind string) string { return kind + "-" + uuid.NewString()[:8] }

// request runs sql (a call that returns a request id) on conn and returns the id.
func (e *env) request(conn *pgx.Conn, sql string, args ...any) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	if err := conn.QueryRow(e.ctx, sql, args...).Scan(&id); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return id
}

func (e *env) wait(id uuid.UUID) sidecartest.Row {
	e.t.Helper()
	return sidecartest.Wait(e.t, e.sql, id, 120*time.Second)
}

func (e *env) mustSucceed(id uuid.UUID) {
	e.t.Helper()
	if r := e.wait(id); r.Status != "succeeded" {
		e.t.Fatalf("request %s (%s): %s: %s", id, r.Kind, r.Status, deref(r.Error))
	}
}

func (e *env) mustFail(id uuid.UUID, contains ...string) {
	e.t.Helper()
	r := e.wait(id)
	if r.Status != "failed" {
		e.t.Fatalf("request %s (%s): %s, want failed", id, r.Kind, r.Status)
	}
	for _, c := range contains {
		if !strings.Contains(deref(r.Error), c) {
			e.t.Fatalf("request %s (%s) failed with %q, want it to say %q", id, r.Kind, deref(r.Error), c)
		}
	}
}

// fork creates fork of parent as u (create_fork's trailing arguments in extra, e.g.
// "expires_in => '1 second'") and waits for it.
func (e *env) fork(u user, parent, fork, extra string) {
	e.t.Helper()
	sql := `SELECT dataenv.create_fork($1, $2`
	if extra != "" {
		sql += ", " + extra
	}
	e.mustSucceed(e.request(u.conn, sql+")", parent, fork))
}

func (e *env) exists(ws string) bool {
	e.t.Helper()
	return testenv.Query[bool](e.t, e.sql, `SELECT EXISTS (SELECT FROM dataenv.workspaces WHERE id = $1)`, ws)
}

// waitGone waits until the sidecar dropped ws.
func (e *env) waitGone(ws string) {
	e.t.Helper()
	testenv.Eventually(e.t, 2*time.Minute, "workspace "+ws+" to be dropped", func() bool { return !e.exists(ws) })
}

// expiryRequests lists the drop_fork requests the sidecar filed for fork's expiry.
func (e *env) expiryRequests(fork string) []uuid.UUID {
	e.t.Helper()
	rows, err := e.sql.Query(e.ctx, `SELECT request_id FROM dataenv.fork_expirations WHERE fork = $1 ORDER BY filed_at`, fork)
	if err != nil {
		e.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// errOf runs sql on conn and returns its error text with the hint ("" when it succeeded).
func errOf(conn *pgx.Conn, sql string, args ...any) string {
	_, err := conn.Exec(context.Background(), sql, args...)
	if err == nil {
		return ""
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Hint != "" {
		return err.Error() + " HINT: " + pgErr.Hint
	}
	return err.Error()
}

func mustRefuse(t *testing.T, conn *pgx.Conn, contains []string, sql string, args ...any) {
	t.Helper()
	msg := errOf(conn, sql, args...)
	if msg == "" {
		t.Fatalf("%s: succeeded, want an error saying %q", sql, contains)
	}
	for _, c := range contains {
		if !strings.Contains(msg, c) {
			t.Fatalf("%s: %s, want it to say %q", sql, msg, c)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var mustExec = testenv.MustExec
