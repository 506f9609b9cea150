// Package security_test proves the promises of docs/security.md about authorization end to end:
// SQL in a real control database, the real dataenv sidecar binary, a second real cluster
// administered by a non-superuser admin. Each test is an attack from issue 11 (or a rule of the
// threat model) that worked before and is refused now, with nothing changed.
package security_test

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

// control holds the control databases (and is the "instance" cluster); external is administered
// by a non-superuser CREATEDB CREATEROLE admin.
var control, external *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if control, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		if external, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "external"}); err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}

// env is one installed control database with an external cluster registered and set up in it,
// a running sidecar, and the actors of the threat model: an administrator, a workspace owner, a
// member of the owner's workspace, another dataenv user, and a login that is no dataenv user.
type env struct {
	t       *testing.T
	ctx     context.Context
	db      string // the control database
	sql     *pgx.Conn
	cluster string // the external cluster's name in dataenv.clusters
	prefix  string // names of databases and roles the test makes on the external cluster
	appRole string
	sidecar *sidecartest.Process

	admin, owner, member, stranger, outsider user
}

// user is a login role on the control cluster.
type user struct {
	name string
	conn *pgx.Conn
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background()}
	e.db = control.CreateDatabase(t)
	sidecartest.Install(t, control.DSN(e.db))
	e.sql = control.Connect(t, e.db)
	t.Cleanup(func() { dropSlot(control.DSN(e.db)) })

	rnd := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	e.appRole = "dataenv_s" + rnd + "_app"
	repl := "dataenv_s" + rnd + "_repl"
	external.DropRolesAtCleanup(t, e.appRole, repl)
	adminUser, adminPW := external.CreateManagedAdmin(t)
	e.prefix = external.NamePrefix(t)
	e.cluster = e.prefix + "ext"
	e.exec(`SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable')`, e.cluster, external.Host(), external.Port(), adminUser, adminPW)
	e.exec(`SELECT dataenv.update_cluster($1, app_role => $2, replication_role => $3)`, e.cluster, e.appRole, repl)
	e.sidecar = sidecartest.Start(t, sidecartest.Options{DSN: control.DSN(e.db)})
	e.mustSucceed(e.request(e.sql, `SELECT dataenv.setup_cluster($1)`, e.cluster))

	e.admin = e.newUser("LOGIN IN ROLE dataenv_admin")
	e.owner = e.newUser("LOGIN IN ROLE dataenv_user")
	e.member = e.newUser("LOGIN IN ROLE dataenv_user")
	e.stranger = e.newUser("LOGIN IN ROLE dataenv_user")
	e.outsider = e.newUser("LOGIN")
	return e
}

func dropSlot(dsn string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	sidecartest.DropSlot(conn)
}

func (e *env) newUser(attrs string) user {
	e.t.Helper()
	name, pw := control.CreateRole(e.t, attrs)
	return user{name: name, conn: control.ConnectAs(e.t, name, pw, e.db)}
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	mustExec(e.t, e.sql, sql, args...)
}

// request runs sql (returning a request id) on conn and returns the id.
func (e *env) request(conn *pgx.Conn, sql string, args ...any) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	if err := conn.QueryRow(e.ctx, sql, args...).Scan(&id); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return id
}

// row is a finished request, read as the superuser.
type row struct {
	status, err string
	steps       string
}

func (e *env) wait(id uuid.UUID) row {
	e.t.Helper()
	var r row
	var msg *string
	err := e.sql.QueryRow(e.ctx, `SELECT status, error, steps::text FROM dataenv.wait($1, '120 s')`, id).Scan(&r.status, &msg, &r.steps)
	if err != nil {
		e.t.Fatalf("wait %s: %v", id, err)
	}
	if msg != nil {
		r.err = *msg
	}
	if r.status == "pending" || r.status == "running" {
		e.t.Fatalf("request %s still %s after 120 s", id, r.status)
	}
	return r
}

func (e *env) mustSucceed(id uuid.UUID) row {
	e.t.Helper()
	r := e.wait(id)
	if r.status != "succeeded" {
		e.t.Fatalf("request %s: %s: %s\nsteps: %s", id, r.status, r.err, r.steps)
	}
	return r
}

func (e *env) mustFail(id uuid.UUID, contains string) row {
	e.t.Helper()
	r := e.wait(id)
	if r.status != "failed" || !strings.Contains(r.err, contains) {
		e.t.Fatalf("request %s: %s %q, want failed with %q\nsteps: %s", id, r.status, r.err, contains, r.steps)
	}
	return r
}

// bypass inserts a request row as the superuser with the insert trigger (validation and
// authorization) switched off for this session: what a row that reached the table some other way
// looks like to the sidecar. requested_by names the role the sidecar must check.
func (e *env) bypass(kind, args, requestedBy string) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	err := pgx.BeginFunc(e.ctx, e.sql, func(tx pgx.Tx) error {
		if _, err := tx.Exec(e.ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		return tx.QueryRow(e.ctx, `INSERT INTO dataenv.requests (kind, args, requested_by) VALUES ($1, $2::jsonb, $3) RETURNING id`,
			kind, args, requestedBy).Scan(&id)
	})
	if err != nil {
		e.t.Fatalf("insert %s bypassing the trigger: %v", kind, err)
	}
	return id
}

// parentDB creates a database on the external cluster through create_database (as the
// superuser, an administrator), with a table and a row.
func (e *env) parentDB(suffix string) string {
	e.t.Helper()
	db := e.prefix + suffix
	e.mustSucceed(e.request(e.sql, `SELECT dataenv.create_database($1, $2)`, e.cluster, db))
	conn := external.Connect(e.t, db)
	defer conn.Close(e.ctx)
	mustExec(e.t, conn, `SET ROLE `+ident(e.appRole))
	mustExec(e.t, conn, `CREATE TABLE secrets_of_the_owner (v text); INSERT INTO secrets_of_the_owner VALUES ('mine')`)
	return db
}

func databaseExists(t *testing.T, db string) bool {
	t.Helper()
	conn := external.Connect(t, "postgres")
	defer conn.Close(context.Background())
	return queryInt(t, conn, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) == 1
}

func sqlErr(conn *pgx.Conn, sql string, args ...any) error {
	_, err := conn.Exec(context.Background(), sql, args...)
	return err
}

// wantErr fails unless sql on conn fails with an error containing want.
func wantErr(t *testing.T, who string, conn *pgx.Conn, want, sql string, args ...any) {
	t.Helper()
	if err := sqlErr(conn, sql, args...); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %s: %v, want an error with %q", who, sql, err, want)
	}
}

// wantDenied fails unless sql on conn fails with insufficient_privilege (42501): refused for
// who the caller is, whatever the message.
func wantDenied(t *testing.T, who string, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	err := sqlErr(conn, sql, args...)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("%s: %s: %v, want a permission error (SQLSTATE 42501)", who, sql, err)
	}
}

// pgError is err's PostgreSQL error, or nil.
func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func wsID(kind string) string { return kind + "-" + uuid.NewString()[:8] }

// A waiting poll for conditions the sidecar reaches asynchronously (not a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SQL helpers of the test harness, by this package's names.
var (
	mustExec    = testenv.MustExec
	queryInt    = testenv.Query[int]
	queryString = testenv.QueryText
)
