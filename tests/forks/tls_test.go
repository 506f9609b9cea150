package forks_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestForkOverTLS: a cluster whose admin may only connect over TLS (pg_hba rejects it without),
// registered with sslmode=verify-full and a private CA. Forks that need pg_dump, psql and
// pg_restore succeed: the tools use the cluster's TLS settings.
func TestForkOverTLS(t *testing.T) {
	t.Parallel()
	tlsFiles := testenv.NewTLSFiles(t)
	caPEM := tlsFiles.CAPEM
	pg, err := localpg.Start(t.Context(), localpg.Config{Name: "forks-tls", Settings: tlsFiles.ServerSettings()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(t.Context()) })
	super, err := pgx.Connect(t.Context(), pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(t.Context())
	mustExec(t, super, `CREATE ROLE tls_admin LOGIN CREATEDB CREATEROLE PASSWORD 'tls-admin-pw'`)
	hba := filepath.Join(pg.DataDir, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("hostnossl all tls_admin all reject\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	mustExec(t, super, `SELECT pg_reload_conf()`)
	if c, err := pgx.Connect(t.Context(), pg.DSNAs("tls_admin", "tls-admin-pw", "postgres")); err == nil {
		_ = c.Close(t.Context())
		t.Fatal("the admin connected without TLS")
	}

	f := newFixture(t)
	a := f.newUser()
	name, app := f.prefix+"tls", "dataenv_"+f.prefix+"tlsapp"
	f.exec(`SELECT dataenv.register_cluster($1, '127.0.0.1', $2, 'tls_admin', 'tls-admin-pw', 'verify-full', $3)`, name, pg.Port(), caPEM)
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
