package cluster_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// TestDropDatabaseRefusesAStandIn: the application role (here given CREATEDB, as a managed
// Postgres might) owns a database dataenv created; it renames it and creates a stand-in with the
// old name and a copy of the marker. Name, marker, owner and record all match the stand-in; the
// OID recorded at creation does not, and drop_database refuses, with the way out in the error.
func TestDropDatabaseRefusesAStandIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()
	db, moved := f.prefix+"db", f.prefix+"moved"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	oid := queryString(t, ext, `SELECT oid::text FROM pg_database WHERE datname = $1`, db)
	if rec := queryString(t, f.sql, `SELECT database_oid::text || ' ' || owner_oid::text FROM dataenv.managed_databases WHERE name = $1`, db); rec != oid+" "+queryString(t, ext, `SELECT oid::text FROM pg_roles WHERE rolname = $1`, f.appRole) {
		t.Fatalf("record %q: want the database's OID %s and the application role's", rec, oid)
	}
	marker := queryString(t, ext, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, db)

	mustExec(t, ext, "ALTER ROLE "+ident(f.appRole)+" CREATEDB")
	app := external.ConnectAs(t, f.appRole, queryString(t, f.sql, `SELECT app_password FROM dataenv.cluster_secrets WHERE cluster = $1`, f.name), "postgres")
	mustExec(t, app, "ALTER DATABASE "+ident(db)+" RENAME TO "+ident(moved))
	mustExec(t, app, "CREATE DATABASE "+ident(db))
	mustExec(t, app, "COMMENT ON DATABASE "+ident(db)+" IS "+literalSQL(marker))
	_ = app.Close(f.ctx)

	_, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, db))
	if !request.IsRefused(err) || !strings.Contains(err.Error(), "is now named "+`"`+moved+`"`) {
		t.Fatalf("drop of the stand-in: %v, want a refusal naming the renamed database", err)
	}
	for _, name := range []string{db, moved} {
		if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, name) != 1 {
			t.Fatalf("database %s was dropped", name)
		}
	}
	// Without the stand-in the record is not given up either: the database lives on, renamed.
	mustExec(t, ext, "DROP DATABASE "+ident(db))
	if _, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, db)); !request.IsRefused(err) || !strings.Contains(err.Error(), "rename it back") {
		t.Fatalf("drop of a renamed database: %v", err)
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1`, db); n != 1 {
		t.Fatal("the record was removed while the database lives on under another name")
	}
	// Renamed back, it is dataenv's again.
	mustExec(t, ext, "ALTER DATABASE "+ident(moved)+" RENAME TO "+ident(db))
	f.mustRun(cluster.KindDropDatabase, dbArgs(f, db))
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 0 {
		t.Fatal("the database is still there")
	}
}

// TestDropDatabaseRefusesAReplacement: the database dataenv created is gone and another with its
// name and marker took its place: refused, left alone.
func TestDropDatabaseRefusesAReplacement(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()
	db := f.prefix + "db"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	marker := queryString(t, ext, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, db)
	mustExec(t, ext, "DROP DATABASE "+ident(db))
	mustExec(t, ext, "CREATE DATABASE "+ident(db)+" OWNER "+ident(f.appRole))
	mustExec(t, ext, "COMMENT ON DATABASE "+ident(db)+" IS "+literalSQL(marker))
	if _, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, db)); !request.IsRefused(err) || !strings.Contains(err.Error(), "replaced by another database") {
		t.Fatalf("drop of a replacement: %v", err)
	}
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 1 {
		t.Fatal("the replacement was dropped")
	}
}

// TestDropOfARecordWithoutIdentity: a record from before OIDs were recorded is dropped on the
// marker and the owner (the application role) alone, and refused when the owner changed.
func TestDropOfARecordWithoutIdentity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()
	db := f.prefix + "db"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	f.exec(`UPDATE dataenv.managed_databases SET database_oid = NULL, owner_oid = NULL WHERE name = $1`, db)
	other, _ := external.CreateRole(t, "NOLOGIN")
	mustExec(t, ext, "ALTER DATABASE "+ident(db)+" OWNER TO "+ident(other))
	if _, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, db)); !request.IsRefused(err) || !strings.Contains(err.Error(), "not by the managed application role") {
		t.Fatalf("drop of an unrecorded database owned by another role: %v", err)
	}
	mustExec(t, ext, "ALTER DATABASE "+ident(db)+" OWNER TO "+ident(f.appRole))
	f.mustRun(cluster.KindDropDatabase, dbArgs(f, db))
}

// TestDropDatatableRoleRefusesAStandIn: a datatable role renamed and replaced by a stand-in with
// the copied marker is refused by its recorded OID.
func TestDropDatatableRoleRefusesAStandIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()
	role, moved := f.prefix+"reader", f.prefix+"moved"
	args := map[string]any{"cluster": f.name, "role": role}
	f.mustRun(cluster.KindCreateDatatableRole, args)
	if rec, oid := queryString(t, f.sql, `SELECT role_oid::text FROM dataenv.datatable_roles WHERE role = $1`, role),
		queryString(t, ext, `SELECT oid::text FROM pg_roles WHERE rolname = $1`, role); rec != oid {
		t.Fatalf("recorded role OID %s, the role's %s", rec, oid)
	}
	marker := queryString(t, ext, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, role)
	mustExec(t, ext, "ALTER ROLE "+ident(role)+" RENAME TO "+ident(moved))
	mustExec(t, ext, "CREATE ROLE "+ident(role)+" NOLOGIN")
	mustExec(t, ext, "COMMENT ON ROLE "+ident(role)+" IS "+literalSQL(marker))
	if _, err, _ := f.run(cluster.KindDropDatatableRole, args); !request.IsRefused(err) || !strings.Contains(err.Error(), "is now named") {
		t.Fatalf("drop of a stand-in role: %v", err)
	}
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_roles WHERE rolname IN ($1, $2)`, role, moved) != 2 {
		t.Fatal("a role was dropped")
	}
	mustExec(t, ext, "DROP ROLE "+ident(role))
	mustExec(t, ext, "ALTER ROLE "+ident(moved)+" RENAME TO "+ident(role))
	f.mustRun(cluster.KindDropDatatableRole, args)
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_roles WHERE rolname = $1`, role) != 0 {
		t.Fatal("the datatable role is still there")
	}
}

func literalSQL(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// TestSetupRefusesAStandInManagedRole: setup records the OIDs of the roles it converges; a
// managed role renamed away and replaced by a role with its name and a copied marker does not get
// the password (nor, through it, the databases dataenv creates).
func TestSetupRefusesAStandInManagedRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()
	moved := f.prefix + "moved_app"
	if rec, oid := queryString(t, f.sql, `SELECT app_role_oid::text FROM dataenv.clusters WHERE name = $1`, f.name),
		queryString(t, ext, `SELECT oid::text FROM pg_roles WHERE rolname = $1`, f.appRole); rec != oid {
		t.Fatalf("recorded application role OID %s, the role's %s", rec, oid)
	}
	marker := queryString(t, ext, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, f.appRole)
	mustExec(t, ext, "ALTER ROLE "+ident(f.appRole)+" RENAME TO "+ident(moved))
	mustExec(t, ext, "CREATE ROLE "+ident(f.appRole)+" NOLOGIN")
	mustExec(t, ext, "COMMENT ON ROLE "+ident(f.appRole)+" IS "+literalSQL(marker))
	if _, err, _ := f.run(cluster.KindSetupCluster, map[string]any{"cluster": f.name}); !request.IsRefused(err) || !strings.Contains(err.Error(), "is now named") {
		t.Fatalf("setup over a stand-in application role: %v", err)
	}
	if login := queryString(t, ext, `SELECT rolcanlogin::text FROM pg_roles WHERE rolname = $1`, f.appRole); login != "false" {
		t.Fatal("setup converged the stand-in")
	}
	mustExec(t, ext, "DROP ROLE "+ident(f.appRole))
	mustExec(t, ext, "ALTER ROLE "+ident(moved)+" RENAME TO "+ident(f.appRole))
	f.setup()
}
