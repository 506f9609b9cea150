package testenv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/tests/testenv"
)

func TestTwoClustersAtOnce(t *testing.T) {
	ctx := context.Background()
	ids := map[string]bool{}
	for _, pg := range []interface {
		Connect(testing.TB, string) *pgx.Conn
	}{control, external} {
		conn := pg.Connect(t, "postgres")
		var sysid, walLevel string
		var slots int
		err := conn.QueryRow(ctx, `SELECT system_identifier::text, current_setting('wal_level'),
			current_setting('max_replication_slots')::int FROM pg_control_system()`).Scan(&sysid, &walLevel, &slots)
		if err != nil {
			t.Fatal(err)
		}
		if walLevel != "logical" || slots < 20 {
			t.Errorf("wal_level=%s max_replication_slots=%d, want logical and >= 20", walLevel, slots)
		}
		ids[sysid] = true
	}
	if len(ids) != 2 || control.Port() == external.Port() {
		t.Fatalf("expected two distinct clusters, got system ids %v, ports %d and %d",
			ids, control.Port(), external.Port())
	}
}

func TestManagedAdminCreatesDatabaseAndRole(t *testing.T) {
	ctx := context.Background()
	prefix := external.NamePrefix(t)
	admin, password := external.CreateManagedAdmin(t)
	conn := external.ConnectAs(t, admin, password, "postgres")

	var super, createdb, createrole bool
	err := conn.QueryRow(ctx, `SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles
		WHERE rolname = current_user`).Scan(&super, &createdb, &createrole)
	if err != nil {
		t.Fatal(err)
	}
	if super || !createdb || !createrole {
		t.Fatalf("managed admin: super=%v createdb=%v createrole=%v", super, createdb, createrole)
	}
	db, role := prefix+"db", prefix+"role"
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		t.Fatalf("managed admin CREATE DATABASE: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD 'x'"); err != nil {
		t.Fatalf("managed admin CREATE ROLE: %v", err)
	}
	// Not a superuser: reading a superuser-only setting is refused.
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET work_mem = '8MB'")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("ALTER SYSTEM as managed admin: got %v, want insufficient_privilege", err)
	}
	// The new database belongs to the admin and is usable.
	dbConn := external.ConnectAs(t, admin, password, db)
	if _, err := dbConn.Exec(ctx, "CREATE TABLE t(x int)"); err != nil {
		t.Fatal(err)
	}
}

// TestPerTestObjectsAreDropped runs helpers in a subtest and checks that its cleanup dropped
// what it made: a database, a role owning a database and a table elsewhere, prefixed names.
func TestPerTestObjectsAreDropped(t *testing.T) {
	ctx := context.Background()
	var db, role, prefix, roleDB string
	t.Run("inner", func(t *testing.T) {
		db = control.CreateDatabase(t)
		var pw string
		role, pw = control.CreateRole(t, "LOGIN CREATEDB")
		prefix = control.NamePrefix(t)
		roleConn := control.ConnectAs(t, role, pw, "postgres")
		roleDB = prefix + "owned"
		if _, err := roleConn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{roleDB}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		su := control.Connect(t, db)
		if _, err := su.Exec(ctx, "CREATE TABLE shared(x int); GRANT SELECT ON shared TO "+
			pgx.Identifier{role}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		if _, err := su.Exec(ctx, "CREATE ROLE "+pgx.Identifier{prefix + "made_by_code"}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	})
	conn := control.Connect(t, "postgres")
	var n int
	err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_database WHERE datname = ANY($1))
		+ (SELECT count(*) FROM pg_roles WHERE rolname = $2 OR starts_with(rolname, $3))`,
		[]string{db, roleDB}, role, prefix).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d databases/roles of the subtest survived its cleanup (db %s, role %s, prefix %s)",
			n, db, role, prefix)
	}
}

func TestRestartKeepsDSN(t *testing.T) {
	// A cluster of its own: restarting the shared ones would disturb parallel tests.
	ctx := context.Background()
	pg, err := testenv.StartPostgres(ctx, testenv.PGOptions{Name: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(ctx) })
	db := pg.CreateDatabase(t)
	dsn := pg.DSN(db)
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pg.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	conn.Close(ctx)
}
