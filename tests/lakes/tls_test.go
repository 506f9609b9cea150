package lakes_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/testenv"
)

// A lake whose catalog lives on a cluster reachable only over TLS (pg_hba refuses its admin
// without), registered with sslmode=verify-full and a private CA: a job in the jail (isolation
// forced to jailed, so a missing bubblewrap fails it rather than falling back) attaches it, which
// needs the root certificate file the sidecar writes to be readable inside the jail, and writes
// and reads a table through it.
func TestJailedJobOnTLSCatalog(t *testing.T) {
	t.Parallel()
	cat := testenv.StartTLSOnlyCluster(t, "lakes-tls")
	super, err := pgx.Connect(t.Context(), cat.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(t.Context())
	mustExec(t, super, `CREATE DATABASE tls_catalog OWNER `+cat.Admin)

	e := newEnv(t)
	mustExec(t, e.conn, `SELECT dataenv.register_cluster('tlscat', '127.0.0.1', $1, $2, $3, 'verify-full', $4)`,
		cat.Port(), cat.Admin, cat.AdminPassword, cat.TLS.CAPEM)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'tlscat', 'tls_catalog', 'st', 'lakes/main')`)
	e.startSidecar("DATAENV_JOB_ISOLATION=jailed")

	r := e.run("prod", attachMain+"CREATE TABLE dl.t AS SELECT range AS id FROM range(3);\nSELECT count(*) AS n, max(id) AS top FROM dl.t")
	if got := r.rowsText(); got != "3,2" {
		t.Fatalf("rows %q, want 3,2", got)
	}
	// The catalog really is on the TLS cluster: DuckLake's tables are there.
	cc, err := pgx.Connect(t.Context(), cat.DSN("tls_catalog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(t.Context())
	var tables int
	if err := cc.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE tablename = 'ducklake_snapshot'`).Scan(&tables); err != nil || tables == 0 {
		t.Fatalf("no DuckLake catalog tables in tls_catalog (%d, %v)", tables, err)
	}
}
