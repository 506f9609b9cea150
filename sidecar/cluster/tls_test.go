package cluster_test

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
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/sidecar/localpg"
)

// TestTLSVerifyFullWithRootCertificate: a cluster with a private CA is reached with
// sslmode=verify-full and root_certificate_pem by pgx connections and by libpq tools; another CA
// is refused in verify-full and in require (which verifies the chain when a root certificate is
// given).
func TestTLSVerifyFullWithRootCertificate(t *testing.T) {
	t.Parallel()
	caPEM, dir := serverCertificates(t)
	otherCA, _ := newCA(t)
	pg, err := localpg.Start(t.Context(), localpg.Config{Name: "tls", Settings: map[string]string{
		"ssl": "on", "ssl_cert_file": "'" + filepath.Join(dir, "server.crt") + "'",
		"ssl_key_file": "'" + filepath.Join(dir, "server.key") + "'",
	}})
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
	cmd := exec.CommandContext(f.ctx, pgDumpPath(), "--schema-only")
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

func pgDumpPath() string {
	if p, err := exec.LookPath("pg_dump"); err == nil {
		return p
	}
	return "/usr/lib/postgresql/15/bin/pg_dump"
}

func newCA(t *testing.T) (string, *x509.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dataenv test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	caKeys[cert] = key
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), cert
}

var caKeys = map[*x509.Certificate]*ecdsa.PrivateKey{}

// serverCertificates writes a server certificate for 127.0.0.1/localhost signed by a new CA into
// a directory the server's OS user can read, and returns the CA's PEM and the directory.
func serverCertificates(t *testing.T) (string, string) {
	t.Helper()
	caPEM, ca := newCA(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKeys[ca])
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	dir, err := os.MkdirTemp("", "dataenv-tls-")
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
	if os.Geteuid() == 0 { // localpg runs the server as the postgres OS user
		name := os.Getenv("DATAENV_PG_USER")
		if name == "" {
			name = "postgres"
		}
		if u, err := user.Lookup(name); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			_ = os.Chown(crt, uid, gid)
			_ = os.Chown(k, uid, gid)
		}
	}
	return caPEM, dir
}
