package cluster_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// TestSQLRegistrationValidation: register/update/remove refuse bad input with a clear error and
// change nothing.
func TestSQLRegistrationValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct{ sql, want string }{
		{`SELECT dataenv.register_cluster('instance', 'h', 5432, 'u', 'p', 'disable')`, `"instance"`},
		{`SELECT dataenv.register_cluster($1, 'h', 5432, 'u', 'p', 'disable')`, "already exists"},
		{`SELECT dataenv.register_cluster('c2', 'h', 0, 'u', 'p', 'disable')`, "port"},
		{`SELECT dataenv.register_cluster('c2', 'h;x', 5432, 'u', 'p', 'disable')`, "host"},
		{`SELECT dataenv.register_cluster('c2', 'h', 5432, '', 'p', 'disable')`, "admin_user"},
		{`SELECT dataenv.register_cluster('c2', 'h', 5432, 'u', '', 'disable')`, "admin_password"},
		{`SELECT dataenv.register_cluster('c2', 'h', 5432, 'u', 'p', 'sometimes')`, "sslmode"},
		{`SELECT dataenv.register_cluster('c2', 'h', 5432, 'u', 'p', 'verify-full', 'not a pem')`, "root_certificate_pem"},
		{`SELECT dataenv.update_cluster('nope', port => 1)`, "no cluster"},
		{`SELECT dataenv.update_cluster('instance', port => 1)`, "instance cluster"},
		{`SELECT dataenv.update_cluster($1, app_role => 'app')`, "managed role name"},
		{`SELECT dataenv.remove_cluster('instance')`, "cannot be removed"},
		{`SELECT dataenv.setup_cluster('nope')`, "no cluster"},
		{`INSERT INTO dataenv.requests (kind, args) VALUES ('setup_cluster', jsonb_build_object('cluster', $1::text, 'password', 'x'))`, "unknown argument"},
		{`INSERT INTO dataenv.requests (kind, args) VALUES ('drop_database', jsonb_build_object('cluster', $1::text, 'name', 'db', 'terminate_sessions', 'yes'))`, "terminate_sessions"},
	}
	for _, c := range cases {
		var err error
		if strings.Contains(c.sql, "$1") {
			err = f.sqlErr(c.sql, f.name)
		} else {
			err = f.sqlErr(c.sql)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error mentioning %s", c.sql, err, c.want)
		}
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.clusters`); n != 2 {
		t.Fatalf("%d clusters after refused calls", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.requests`); n != 0 {
		t.Fatalf("%d requests after refused calls", n)
	}
}

func TestSQLRequestFunctionsAndRemoval(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Request args carry names only.
	id := queryString(t, f.sql, `SELECT dataenv.setup_cluster($1)::text`, f.name)
	if args := queryString(t, f.sql, `SELECT args::text FROM dataenv.requests WHERE id = $1::uuid`, id); args != `{"cluster": "`+f.name+`"}` {
		t.Fatalf("setup_cluster args %s", args)
	}
	f.setup()
	db := f.prefix + "db"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	if err := f.sqlErr(`SELECT dataenv.create_database($1, $2)`, f.name, db); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("SQL create of a recorded database: %v", err)
	}
	id = queryString(t, f.sql, `SELECT dataenv.drop_database($1, $2, terminate_sessions => true)::text`, f.name, db)
	if args := queryString(t, f.sql, `SELECT args::text FROM dataenv.requests WHERE id = $1::uuid`, id); !strings.Contains(args, `"terminate_sessions": true`) {
		t.Fatalf("drop_database args %s", args)
	}
	if err := f.sqlErr(`SELECT dataenv.remove_cluster($1)`, f.name); err == nil || !strings.Contains(err.Error(), db) {
		t.Fatalf("remove_cluster with a managed database: %v", err)
	}
	f.mustRun(cluster.KindDropDatabase, dbArgs(f, db))
	f.exec(`SELECT dataenv.remove_cluster($1)`, f.name)
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.cluster_secrets WHERE cluster = $1`, f.name); n != 0 {
		t.Fatal("the secret outlived its cluster")
	}
}
