package forks_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/tests/sidecartest"

	"github.com/dataenv/dataenv/tests/testenv"
)

// fixture is one installed control database, an external cluster registered and set up in it
// (non-superuser admin, managed roles named for the test), and a running sidecar.
type fixture struct {
	t          *testing.T
	ctx        context.Context
	controlDB  string
	controlDSN string
	sql        *pgx.Conn // superuser on the control database
	name       string    // the external cluster's name in dataenv.clusters
	prefix     string    // names of databases the test makes on the external cluster
	appRole    string
	adminUser  string
	pg         *testenv.Postgres // the cluster registered as name (external by default)
	sidecar    *sidecartest.Process
}

func newFixture(t *testing.T, sidecarEnv ...string) *fixture {
	t.Helper()
	return newFixtureOn(t, external, sidecarEnv...)
}

// newFixtureOn is newFixture with another cluster than external registered.
func newFixtureOn(t *testing.T, pg *testenv.Postgres, sidecarEnv ...string) *fixture {
	t.Helper()
	return newFixtureWith(t, pg, pg.CreateManagedAdmin, sidecarEnv...)
}

// newSuperuserFixture is newFixture with external registered under an admin that is a
// superuser (the embedded default's kind, and a self-hosted cluster's).
func newSuperuserFixture(t *testing.T, sidecarEnv ...string) *fixture {
	t.Helper()
	return newFixtureWith(t, external, func(t testing.TB) (string, string) {
		return external.CreateRole(t, "LOGIN SUPERUSER")
	}, sidecarEnv...)
}

// newFixtureWith is newFixtureOn with the cluster's admin made by admin.
func newFixtureWith(t *testing.T, pg *testenv.Postgres, admin func(testing.TB) (string, string), sidecarEnv ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), pg: pg}
	f.controlDB = control.CreateDatabase(t)
	f.controlDSN = control.DSN(f.controlDB)
	f.sql = control.Connect(t, f.controlDB)
	if _, err := install.Install(f.ctx, f.sql, install.Options{Logger: discard}); err != nil {
		t.Fatalf("install: %v", err)
	}
	t.Cleanup(f.dropSlot)

	rnd := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	f.appRole = "dataenv_x" + rnd + "_app"
	replRole := "dataenv_x" + rnd + "_repl"
	pg.DropRolesAtCleanup(t, f.appRole, replRole)
	adminUser, adminPW := admin(t)
	f.adminUser = adminUser
	f.prefix = pg.NamePrefix(t)
	f.name = f.prefix + "ext"
	f.exec(`SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable')`,
		f.name, pg.Host(), pg.Port(), adminUser, adminPW)
	f.exec(`SELECT dataenv.update_cluster($1, app_role => $2, replication_role => $3)`, f.name, f.appRole, replRole)
	f.sidecar = f.startSidecar(sidecarEnv...)
	t.Cleanup(func() { // runs before the sidecar stops
		settleTemplates(t, f.controlDSN)
		dropSpares(t, f.controlDSN, pg)
	})
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.setup_cluster($1)`, f.name))
	return f
}

// settleTemplates waits (a minute at most) for the schema template builds that schema_only forks
// asked for: a build the sidecar's stop interrupts could leave a database the cleanup misses.
func settleTemplates(t *testing.T, dsn string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var id string
		err := conn.QueryRow(ctx, `SELECT id::text FROM dataenv.requests WHERE kind = 'refresh_schema_template'
			AND status IN ('pending', 'running') LIMIT 1`).Scan(&id)
		if err != nil {
			return // none left (or the database is gone)
		}
		if _, err := conn.Exec(ctx, `SELECT status FROM dataenv.wait($1::uuid, '60 s')`, id); err != nil {
			t.Logf("schema template request %s did not finish: %v", id, err)
			return
		}
	}
}

// dropSpares drops the spares the test's templates still have, with their roles: a spare is
// owned by its own role, not by the application role whose databases the cleanup drops.
func dropSpares(t *testing.T, dsn string, pg *testenv.Postgres) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT role FROM dataenv.schema_templates WHERE role IS NOT NULL`)
	if err != nil {
		return
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	if err := pg.DropRoles(ctx, roles...); err != nil {
		t.Errorf("drop the spares' roles %v: %v", roles, err)
	}
}

// dropSlot removes the control database's slot so the database can be dropped.
func (f *fixture) dropSlot() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.controlDSN)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	sidecartest.DropSlot(conn)
}

// startSidecar runs the real dataenv binary (built from ./sidecar/cmd/dataenv, whose
// composition root registers the fork handlers) against the control database.
func (f *fixture) startSidecar(env ...string) *sidecartest.Process {
	f.t.Helper()
	p := sidecartest.Start(f.t, sidecartest.Options{DSN: f.controlDSN, Env: env})
	// Runs before this sidecar stops: a sidecar a test started in place of the fixture's stops
	// before the fixture's cleanup, which would wait a minute for a refresh nobody runs.
	f.t.Cleanup(func() {
		select {
		case <-p.Exited():
		default:
			settleTemplates(f.t, f.controlDSN)
		}
	})
	return p
}

// forkRole is the workspace role that owns fork's copies on the fixture's cluster (recorded in
// dataenv.workspace_roles while the fork exists).
func (f *fixture) forkRole(fork string) string {
	f.t.Helper()
	role := queryString(f.t, f.sql, `SELECT role FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = $2`, f.name, fork)
	if role == "" {
		f.t.Fatalf("fork %s has no workspace role on cluster %s", fork, f.name)
	}
	return role
}

// waitIdle waits (a minute at most) until no session is connected to db, as conn (on another
// database of the same cluster) sees it: a closed connection's backend may take a moment to exit
// on a loaded machine, and a full_copy is a TEMPLATE copy only of an idle parent.
func waitIdle(t *testing.T, conn *pgx.Conn, db string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		if queryInt(t, conn, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, db) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions are still connected to %s after a minute", db)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// row is a finished request.
type row struct {
	id     string
	status string
	err    string
	result []byte
	steps  []byte
}

// request runs sql (returning a request id) on conn and returns the id.
func (f *fixture) request(conn *pgx.Conn, sql string, args ...any) string {
	f.t.Helper()
	var id string
	if err := conn.QueryRow(f.ctx, "SELECT ("+strings.TrimPrefix(sql, "SELECT ")+")::text", args...).Scan(&id); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
	return id
}

// wait waits for a request to finish (read as the superuser).
func (f *fixture) wait(id string) row {
	f.t.Helper()
	r := row{id: id}
	var e *string
	err := f.sql.QueryRow(f.ctx, `SELECT status, error, result, steps FROM dataenv.wait($1::uuid, '120 s')`, id).
		Scan(&r.status, &e, &r.result, &r.steps)
	if err != nil {
		f.t.Fatalf("wait %s: %v", id, err)
	}
	if e != nil {
		r.err = *e
	}
	return r
}

func (f *fixture) mustSucceed(id string) row {
	f.t.Helper()
	r := f.wait(id)
	if r.status != "succeeded" {
		f.t.Fatalf("request %s: %s: %s\nsteps: %s", id, r.status, r.err, r.steps)
	}
	return r
}

func (f *fixture) mustFail(id, contains string) row {
	f.t.Helper()
	r := f.wait(id)
	if r.status != "failed" || !strings.Contains(r.err, contains) {
		f.t.Fatalf("request %s: %s %q, want failed with %q\nsteps: %s", id, r.status, r.err, contains, r.steps)
	}
	return r
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.sql.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// user is a login role on the control cluster that may call the dataenv API.
type user struct {
	name string
	conn *pgx.Conn
}

func (f *fixture) newUser() user {
	f.t.Helper()
	name, pw := control.CreateRole(f.t, "LOGIN IN ROLE dataenv_user")
	return user{name: name, conn: control.ConnectAs(f.t, name, pw, f.controlDB)}
}

// grantDatabase lets u bind database db of cluster to its workspaces (binding is an
// administrator's act or needs such a grant).
func (f *fixture) grantDatabase(u user, cluster, db string) {
	f.t.Helper()
	f.exec(`SELECT dataenv.grant_database($1, $2, $3)`, cluster, db, u.name)
}

// parentDB creates a marked database on the fixture's cluster through create_database and fills
// it as the application role: tables with a primary key, unique, check and foreign key
// constraints, an index, a view and rows.
func (f *fixture) parentDB(suffix string, rows int) string {
	f.t.Helper()
	db := f.prefix + suffix
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_database($1, $2)`, f.name, db))
	conn := f.pg.Connect(f.t, db)
	mustExec(f.t, conn, `SET ROLE `+ident(f.appRole))
	mustExec(f.t, conn, `
		CREATE TABLE customers (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE, score int CHECK (score >= 0));
		CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id bigint NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
		                     amount numeric(12,2) NOT NULL DEFAULT 0, placed_at timestamptz NOT NULL DEFAULT now());
		CREATE INDEX orders_customer_placed_idx ON orders (customer_id, placed_at DESC);
		CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 100;
		COMMENT ON TABLE orders IS 'the orders';`)
	mustExec(f.t, conn, `INSERT INTO customers (email, score) SELECT 'c' || g || '@x', g FROM generate_series(1, $1::int) g`, rows)
	mustExec(f.t, conn, `INSERT INTO orders (customer_id, amount) SELECT id, id * 10 FROM customers`)
	_ = conn.Close(f.ctx)
	return db
}

// schemaOf describes the tables, columns, constraints, indexes and views of a database.
func schemaOf(t *testing.T, db string) string {
	t.Helper()
	conn := external.Connect(t, db)
	defer conn.Close(context.Background())
	var out string
	err := conn.QueryRow(context.Background(), `
		SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		  SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
		         || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') AS x
		    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid
		    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
		   WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
		  UNION ALL
		  SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
		    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		  UNION ALL
		  SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
		  UNION ALL
		  SELECT 'view ' || viewname || ' ' || definition FROM pg_views WHERE schemaname = 'public'
		  UNION ALL
		  SELECT 'comment ' || c.relname || ' ' || obj_description(c.oid, 'pg_class') FROM pg_class c
		   WHERE c.relnamespace = 'public'::regnamespace AND obj_description(c.oid, 'pg_class') IS NOT NULL
		) s`).Scan(&out)
	if err != nil {
		t.Fatalf("schema of %s: %v", db, err)
	}
	return out
}

func countRows(t *testing.T, db, table string) int {
	t.Helper()
	conn := external.Connect(t, db)
	defer conn.Close(context.Background())
	return queryInt(t, conn, `SELECT count(*) FROM `+ident(table))
}

func databaseExists(t *testing.T, db string) bool {
	t.Helper()
	conn := external.Connect(t, "postgres")
	defer conn.Close(context.Background())
	return queryInt(t, conn, `SELECT count(*) FROM pg_database WHERE datname = $1`, db) == 1
}

func sqlErr(conn *pgx.Conn, sql string, args ...any) error {
	_, err := conn.Exec(context.Background(), sql, args...)
	return err
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// SQL helpers of the test harness, by this package's names.
var (
	queryInt    = testenv.Query[int]
	queryString = testenv.QueryText
	mustExec    = testenv.MustExec
)
