package forks_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/sidecar/names"
)

// TestForkOverTLS: a cluster whose admin may only connect over TLS (pg_hba rejects it without),
// registered with sslmode=verify-full and a private CA. Forks that need pg_dump, psql and
// pg_restore succeed: the tools use the cluster's TLS settings.
func TestForkOverTLS(t *testing.T) {
	t.Parallel()
	caPEM, dir := tlsFiles(t)
	pg, err := localpg.Start(t.Context(), localpg.Config{Name: "forks-tls", Settings: map[string]string{
		"ssl": "on", "ssl_cert_file": "'" + filepath.Join(dir, "server.crt") + "'",
		"ssl_key_file": "'" + filepath.Join(dir, "server.key") + "'",
	}})
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

// tlsFiles makes a CA and a server certificate for 127.0.0.1 in a directory the server's OS user
// can read, and returns the CA certificate (PEM) and the directory.
func tlsFiles(t *testing.T) (string, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "forks test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	dir, err := os.MkdirTemp("", "dataenv-forks-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	crt, k := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 { // localpg runs the server as an unprivileged OS user
		owner := os.Getenv("DATAENV_PG_USER")
		if owner == "" {
			owner = "postgres"
		}
		if u, err := osuser.Lookup(owner); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			_ = os.Chown(crt, uid, gid)
			_ = os.Chown(k, uid, gid)
		}
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})), dir
}
