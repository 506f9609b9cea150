package forks_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestForkOverTLS: a cluster whose admin may only connect over TLS (pg_hba rejects it without),
// registered with sslmode=verify-full and a private CA. Forks that need pg_dump, psql and
// pg_restore succeed: the tools use the cluster's TLS settings.
func TestForkOverTLS(t *testing.T) {
	t.Parallel()
	pg := testenv.StartTLSOnlyCluster(t, "forks-tls")

	f := newFixture(t)
	a := f.newUser()
	name, app := f.prefix+"tls", "dataenv_"+f.prefix+"tlsapp"
	f.exec(`SELECT dataenv.register_cluster($1, '127.0.0.1', $2, $3, $4, 'verify-full', $5)`, name, pg.Port(), pg.Admin, pg.AdminPassword, pg.TLS.CAPEM)
	f.exec(`SELECT dataenv.update_cluster($1, app_role => $2, replication_role => $3)`, name, app, "dataenv_"+f.prefix+"tlsrepl")
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.setup_cluster($1)`, name))
	parent := f.prefix + "tlsparent"
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_database($1, $2)`, name, parent))
	pconn, err := pgx.Connect(t.Context(), pg.DSN(parent))
	if err != nil {
		t.Fatal(err)
	}
	defer pconn.Close(t.Context())
	mustExec(t, pconn, `SET ROLE `+ident(app))
	mustExec(t, pconn, `CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL UNIQUE); INSERT INTO items SELECT g, 'v' || g FROM generate_series(1, 7) g`)

	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, name, parent)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 's', $2, $3)`, ws, name, parent)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'f', $2, $3)`, ws, name, parent)
	// pconn stays open: the full copy cannot use TEMPLATE and goes through pg_dump | pg_restore.
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"s": "schema_only", "f": "full_copy"}')`, ws, fork))
	for dt, want := range map[string]int{"s": 0, "f": 7} {
		c, err := pgx.Connect(t.Context(), pg.DSN(names.ForkDatabase(fork, dt)))
		if err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, c, `SELECT count(*) FROM items`); n != want {
			t.Fatalf("copy %s has %d rows, want %d", dt, n, want)
		}
		_ = c.Close(t.Context())
	}
	if m := queryString(t, f.sql, `SELECT method FROM dataenv.fork_copies WHERE database = $1`, names.ForkDatabase(fork, "f")); m != "dump" {
		t.Fatalf("full copy method %q, want dump", m)
	}
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
}
