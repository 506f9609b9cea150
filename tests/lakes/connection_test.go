package lakes_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

// member is a dataenv user made a member of workspaces.
type member struct {
	name, password string
	conn           *pgx.Conn
}

func (e *env) member(workspaces ...string) member {
	e.t.Helper()
	name, pw := pg.CreateRole(e.t, "LOGIN IN ROLE dataenv_user")
	for _, ws := range workspaces {
		mustExec(e.t, e.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, name)
	}
	return member{name: name, password: pw, conn: pg.ConnectAs(e.t, name, pw, e.conn.Config().Database)}
}

// requestAs makes a request with sql (returning its id) on conn and waits for it.
func (e *env) requestAs(conn *pgx.Conn, sql string, args ...any) (status, errText string) {
	e.t.Helper()
	var id uuid.UUID
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	row := e.wait(id)
	return row.Status, deref(row.Error)
}

// psql runs the real psql on uri with password, returning its output and whether it succeeded.
func psql(t *testing.T, uri, password, sql string) (string, bool) {
	t.Helper()
	bin, err := exec.LookPath("psql")
	if err != nil {
		t.Fatalf("psql: %v", err)
	}
	cmd := exec.Command(bin, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql, uri)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// connInfo is a row of dataenv.connection_info.
type connInfo struct {
	datatable, cluster, database, role, uri string
	ready                                   bool
}

func connectionInfo(t *testing.T, conn *pgx.Conn, workspace string) []connInfo {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT datatable, cluster, database, coalesce(role, ''), uri, ready
		FROM dataenv.connection_info($1)`, workspace)
	if err != nil {
		t.Fatalf("connection_info(%s): %v", workspace, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (connInfo, error) {
		var c connInfo
		return c, r.Scan(&c.datatable, &c.cluster, &c.database, &c.role, &c.uri, &c.ready)
	})
	if err != nil {
		t.Fatalf("connection_info(%s): %v", workspace, err)
	}
	return list
}

// TestMemberConnectsToAForkWithPsql: a member of a fork reaches the fork's copy of a datatable
// with psql through connection_info and connection_password, as the fork's role: it reads (and
// writes) what the parent gave the application role, nothing else, and nothing of another
// workspace; a non-member gets neither the connection info nor the password; after
// rotate_credentials the old password no longer works.
func TestMemberConnectsToAForkWithPsql(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	app := e.setupInstance()
	ctx := context.Background()
	dbs := map[string]string{}
	for _, name := range []string{"crm", "shared", "other"} {
		db := pg.NamePrefix(t) + name
		dbs[name] = db
		if st, msg := e.requestAs(e.conn, `SELECT dataenv.create_database('instance', $1)`, db); st != "succeeded" {
			t.Fatalf("create_database %s: %s %s", db, st, msg)
		}
		c := pg.Connect(t, db)
		mustExec(t, c, `CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL);
			INSERT INTO customers VALUES (1, 'Ada'), (2, 'Grace');
			CREATE TABLE payroll (id int, salary int); INSERT INTO payroll VALUES (1, 100)`)
		mustExec(t, c, `GRANT SELECT, INSERT ON customers TO `+pgx.Identifier{app}.Sanitize())
	}
	mustExec(t, e.conn, `SELECT dataenv.add_datatable('prod', 'crm', 'instance', $1)`, dbs["crm"])
	mustExec(t, e.conn, `SELECT dataenv.add_datatable('prod', 'shared', 'instance', $1)`, dbs["shared"])
	e.workspace("other", "")
	mustExec(t, e.conn, `SELECT dataenv.add_datatable('other', 'crm', 'instance', $1)`, dbs["other"])

	m := e.member("prod")
	if st, msg := e.requestAs(m.conn, `SELECT dataenv.create_fork('prod', 'prod/dev', '{"crm": "full_copy"}')`); st != "succeeded" {
		t.Fatalf("create_fork: %s %s", st, msg)
	}
	info := connectionInfo(t, m.conn, "prod/dev")
	if len(info) != 2 || !info[1].ready || info[1].datatable != "shared" || info[1].database != dbs["shared"] || info[1].role != info[0].role {
		t.Fatalf("connection_info(prod/dev) right after create_fork: %+v", info)
	}
	if len(info) != 2 || !info[0].ready || info[0].datatable != "crm" || info[0].database == dbs["crm"] ||
		!strings.HasPrefix(info[0].role, "dataenv_ws_") || !strings.Contains(info[0].uri, info[0].role+"@") {
		t.Fatalf("connection_info(prod/dev) right after create_fork: %+v", info)
	}
	if strings.Contains(info[0].uri, ":"+m.password) {
		t.Fatal("the uri holds a password")
	}
	pw := queryString(t, m.conn, `SELECT dataenv.connection_password('prod/dev', 'instance')`)
	if out, ok := psql(t, info[0].uri, pw, `SELECT string_agg(name, ',' ORDER BY id) FROM customers`); !ok || out != "Ada,Grace" {
		t.Fatalf("psql as the fork's role: %v %s", ok, out)
	}
	if out, ok := psql(t, info[0].uri, pw, `INSERT INTO customers VALUES (3, 'Linus')`); !ok {
		t.Fatalf("insert into the fork's copy: %s", out)
	}
	// The copy is the application role's (restored as it): all of it is the fork's. In the
	// database the fork shares with the parent, only what the application role was given.
	if out, ok := psql(t, info[0].uri, pw, `SELECT salary FROM payroll`); !ok || out != "100" {
		t.Fatalf("the fork's copy: %v %s", ok, out)
	}
	if out, ok := psql(t, info[1].uri, pw, `SELECT string_agg(name, ',' ORDER BY id) FROM customers`); !ok || out != "Ada,Grace" {
		t.Fatalf("psql on the shared database: %v %s", ok, out)
	}
	if out, ok := psql(t, info[1].uri, pw, `SELECT * FROM payroll`); ok || !strings.Contains(out, "permission denied") {
		t.Fatalf("the fork's role read a table the application role was not given: %v %s", ok, out)
	}
	parent := pg.Connect(t, dbs["crm"])
	if n := queryString(t, parent, `SELECT count(*)::text FROM customers`); n != "2" {
		t.Fatalf("the parent has %s customers after the fork's insert, want 2", n)
	}
	// Another workspace's database with the fork's credentials: nothing.
	otherURI := strings.Replace(info[0].uri, "/"+info[0].database+"?", "/"+dbs["other"]+"?", 1)
	if out, ok := psql(t, otherURI, pw, `SELECT name FROM customers`); ok || !strings.Contains(out, "permission denied") {
		t.Fatalf("the fork's role read another workspace's database: %v %s", ok, out)
	}
	for _, sql := range []string{`SELECT * FROM dataenv.connection_info('other')`, `SELECT dataenv.connection_password('other')`,
		`SELECT dataenv.duckdb_script('other')`} {
		if got := execErr(t, m.conn, sql); !strings.Contains(got, "may not use workspace") {
			t.Errorf("member of prod, on other: %s: %s", sql, got)
		}
	}
	// A non-member learns nothing, not even whether the workspace exists.
	s := e.stranger()
	for _, ws := range []string{"prod/dev", "prod/nothing"} {
		for _, sql := range []string{`SELECT * FROM dataenv.connection_info($1)`, `SELECT dataenv.connection_password($1)`,
			`SELECT dataenv.duckdb_script($1)`, `SELECT dataenv.prepare_connection($1)`, `SELECT dataenv.rotate_credentials($1)`} {
			if got := execErr(t, s, sql, ws); !(strings.Contains(got, "may not use workspace") || strings.Contains(got, "permission denied")) || strings.Contains(got, pw) {
				t.Errorf("stranger: %s (%s): %s", sql, ws, got)
			}
		}
	}
	if _, err := s.Exec(ctx, `SELECT password FROM dataenv.workspace_role_secrets`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a user read the secrets table: %v", err)
	}
	// Rotation: the owner of the fork (the member who made it) rotates; the old password stops working.
	if st, msg := e.requestAs(m.conn, `SELECT dataenv.rotate_credentials('prod/dev')`); st != "succeeded" {
		t.Fatalf("rotate_credentials: %s %s", st, msg)
	}
	if out, ok := psql(t, info[0].uri, pw, `SELECT 1`); ok || !strings.Contains(out, "password authentication failed") {
		t.Fatalf("the old password after rotation: %v %s", ok, out)
	}
	pw2 := queryString(t, m.conn, `SELECT dataenv.connection_password('prod/dev')`)
	if out, ok := psql(t, info[0].uri, pw2, `SELECT count(*) FROM customers`); pw2 == pw || !ok || out != "3" {
		t.Fatalf("the new password: %v %s", ok, out)
	}
	// Revoking a member rotates the passwords: what the member knew stops working.
	other := e.member("prod/dev")
	knew := queryString(t, other.conn, `SELECT dataenv.connection_password('prod/dev')`)
	mustExec(t, m.conn, `SELECT dataenv.revoke_workspace('prod/dev', $1)`, other.name)
	var rot uuid.UUID
	if err := e.conn.QueryRow(ctx, `SELECT id FROM dataenv.requests WHERE kind = 'rotate_credentials' AND args->>'workspace' = 'prod/dev'
		ORDER BY created_at DESC LIMIT 1`).Scan(&rot); err != nil {
		t.Fatalf("no rotation after the revocation: %v", err)
	}
	if row := e.wait(rot); row.Status != "succeeded" {
		t.Fatalf("rotation after the revocation: %s %s", row.Status, deref(row.Error))
	}
	if by := queryString(t, e.conn, `SELECT requested_by::text FROM dataenv.requests WHERE id = $1`, rot); by != m.name {
		t.Fatalf("the rotation was requested by %s, want the revoker %s", by, m.name)
	}
	if out, ok := psql(t, info[0].uri, knew, `SELECT 1`); ok || !strings.Contains(out, "password authentication failed") {
		t.Fatalf("a revoked member's password: %v %s", ok, out)
	}
	if got := execErr(t, other.conn, `SELECT dataenv.connection_password('prod/dev')`); !strings.Contains(got, "may not use workspace") {
		t.Fatalf("a revoked member: %s", got)
	}
	pw2 = queryString(t, m.conn, `SELECT dataenv.connection_password('prod/dev')`)
	// dataenv connect --psql runs psql on a datatable with the new password.
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "connect", "--dsn", pg.DSNAs(m.name, m.password, e.conn.Config().Database), "--workspace", "prod/dev",
		"--psql", "crm", "--", "-XAt", "-c", "SELECT string_agg(name, ',' ORDER BY id) FROM customers")
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "Ada,Grace,Linus" {
		t.Fatalf("dataenv connect --psql: %v %s", err, out)
	}
	// Jobs keep working with the rotated password.
	if got := e.run("prod/dev", "ATTACH 'datatable://crm' AS crm (READ_ONLY); SELECT count(*) FROM crm.public.customers").rowsText(); got != "3" {
		t.Fatalf("a job after rotation: %s", got)
	}
	// prepare_connection on a root: the role gets the datatable's grants.
	if st, msg := e.requestAs(e.conn, `SELECT dataenv.prepare_connection('other')`); st != "succeeded" {
		t.Fatalf("prepare_connection(other): %s %s", st, msg)
	}
	if info := connectionInfo(t, e.conn, "other"); len(info) != 1 || !info[0].ready || info[0].database != dbs["other"] {
		t.Fatalf("connection_info(other): %+v", info)
	}
}
