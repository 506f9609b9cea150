package cluster_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestTLSVerifyFullWithRootCertificate: a cluster with a private CA is reached with
// sslmode=verify-full and root_certificate_pem by pgx connections and by libpq tools; another CA
// is refused in verify-full and in require (which verifies the chain when a root certificate is
// given).
func TestTLSVerifyFullWithRootCertificate(t *testing.T) {
	t.Parallel()
	tlsFiles := testenv.NewTLSFiles(t)
	caPEM := tlsFiles.CAPEM
	otherCA := testenv.NewCAPEM(t)
	cfg, err := testenv.PGOptions{Name: "tls", Settings: tlsFiles.ServerSettings()}.LocalConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Files = tlsFiles.ServerFiles()
	pg, err := localpg.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(t.Context()) })

	f := newFixture(t)
	name := f.prefix + "tls"
	f.exec(`SELECT dataenv.register_cluster($1, '127.0.0.1', $2, $3, $4, 'verify-full', $5)`,
		name, pg.Port(), pg.SuperUser, pg.SuperPassword, caPEM)
	conn, err := f.admin.Connect(f.ctx, name, "postgres")
	if err != nil {
		t.Fatalf("verify-full with the private CA: %v", err)
	}
	if !queryBool(t, conn, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`) {
		t.Fatal("the connection is not encrypted")
	}
	if sp := queryString(t, conn, `SELECT current_setting('search_path')`); sp != "pg_catalog, pg_temp" {
		t.Fatalf("search_path %q", sp)
	}
	_ = conn.Close(f.ctx)

	lp, err := f.admin.Libpq(f.ctx, name, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	var rootFile string
	for _, kv := range lp.Env {
		if v, ok := strings.CutPrefix(kv, "PGSSLROOTCERT="); ok {
			rootFile = v
		}
	}
	if st, err := os.Stat(rootFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("root certificate file %q: %v %v", rootFile, st, err)
	}
	cmd := exec.CommandContext(f.ctx, pgDumpFor(t, pg.Major), "--schema-only")
	cmd.Env = lp.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_dump over verify-full: %v\n%s", err, out)
	}
	_ = lp.Close()
	if _, err := os.Stat(rootFile); !os.IsNotExist(err) {
		t.Fatalf("root certificate file left behind: %v", err)
	}

	for _, mode := range []string{"verify-full", "require"} {
		f.exec(`SELECT dataenv.update_cluster($1, sslmode => $2, root_certificate_pem => $3)`, name, mode, otherCA)
		if c, err := f.admin.Connect(f.ctx, name, "postgres"); err == nil {
			_ = c.Close(f.ctx)
			t.Fatalf("sslmode %s accepted a server certificate of another CA", mode)
		} else if strings.Contains(err.Error(), pg.SuperPassword) {
			t.Fatal("the password is in the error")
		}
	}
}

// pgDumpFor is a pg_dump at least as new as a server of major version major: the machine's or
// a prepared root's (the sidecar's choice, sidecar/internal/pgtool).
func pgDumpFor(t *testing.T, major int) string {
	t.Helper()
	set, err := pgtool.NewFinder(testenv.PGToolDirs()).For(t.Context(), strconv.Itoa(major))
	if err != nil {
		t.Fatal(err)
	}
	return set.Path(pgtool.PgDump)
}
