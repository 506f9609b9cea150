package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are a private CA and a server certificate for 127.0.0.1/localhost signed by it, in a
// temporary directory (removed at test cleanup); a server gets copies (ServerFiles).
type TLSFiles struct {
	CAPEM string // the CA certificate, for root_certificate_pem / sslrootcert
	Dir   string // holds server.crt and server.key
}

// ServerFiles are the certificate and key for localpg.Config.Files (written into the data
// directory), which ServerSettings name: so TLS is served from a cluster in a root too.
func (f TLSFiles) ServerFiles() map[string][]byte {
	files := map[string][]byte{}
	for _, name := range []string{"server.crt", "server.key"} {
		b, err := os.ReadFile(filepath.Join(f.Dir, name))
		if err != nil {
			panic(fmt.Sprintf("testenv: TLS file %s: %v", name, err))
		}
		files[name] = b
	}
	return files
}

// ServerSettings are the postgresql.conf settings that serve the certificate (localpg.Config),
// naming the files ServerFiles puts in the data directory.
func (f TLSFiles) ServerSettings() map[string]string {
	return map[string]string{"ssl": "on", "ssl_cert_file": "'server.crt'", "ssl_key_file": "'server.key'"}
}

// NewTLSFiles makes a CA and a server certificate for 127.0.0.1 and localhost.
func NewTLSFiles(t testing.TB) TLSFiles {
	t.Helper()
	caPEM, ca, caKey := newCA(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
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
	return TLSFiles{CAPEM: caPEM, Dir: dir}
}

// NewCAPEM makes an unrelated CA (a certificate a server's chain does not lead to).
func NewCAPEM(t testing.TB) string {
	t.Helper()
	caPEM, _, _ := newCA(t)
	return caPEM
}

func newCA(t testing.TB) (string, *x509.Certificate, *ecdsa.PrivateKey) {
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
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), cert, key
}
