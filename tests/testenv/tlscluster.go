package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
)

// TLSOnlyCluster is a throwaway cluster (of the version StartPostgres would start) serving a private CA's certificate, with an admin of
// the managed-service kind (LOGIN CREATEDB CREATEROLE) whom pg_hba refuses without TLS: what
// dataenv reaches through it must have used TLS.
type TLSOnlyCluster struct {
	*localpg.Cluster
	TLS           TLSFiles
	Admin         string
	AdminPassword string
}

// StartTLSOnlyCluster starts one (stopped at cleanup) and proves that the admin cannot connect
// without TLS.
func StartTLSOnlyCluster(t testing.TB, name string) *TLSOnlyCluster {
	t.Helper()
	ctx := context.Background()
	c := &TLSOnlyCluster{TLS: NewTLSFiles(t), Admin: "tls_admin", AdminPassword: "tls-admin-pw"}
	cfg, err := PGOptions{Name: name, Settings: c.TLS.ServerSettings(), Logger: defaultLogger()}.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = c.TLS.ServerFiles()
	if c.Cluster, err = localpg.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	super, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(ctx)
	if _, err := super.Exec(ctx, "CREATE ROLE "+ident(c.Admin)+" LOGIN CREATEDB CREATEROLE PASSWORD "+literal(c.AdminPassword)); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(c.DataDir, "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("hostnossl all "+c.Admin+" all reject\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, c.DSNAs(c.Admin, c.AdminPassword, "postgres")); err == nil {
		_ = conn.Close(ctx)
		t.Fatalf("%s: the admin connected without TLS", name)
	}
	return c
}
