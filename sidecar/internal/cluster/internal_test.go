package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestClusterNeverPrintsItsSecret(t *testing.T) {
	c := &Cluster{Name: "c1", Kind: KindExternal, Host: "h", Port: 5432, AdminUser: "admin", SSLMode: "disable",
		adminPassword: "s3cret-value"}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "cluster", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%+v", *c), logs.String()} {
		if strings.Contains(s, "s3cret-value") {
			t.Fatalf("secret printed: %s", s)
		}
	}
	err := scrub(fmt.Errorf("failed with s3cret-value inside"), c.secrets()...)
	if strings.Contains(err.Error(), "s3cret-value") {
		t.Fatalf("scrub left the secret: %v", err)
	}
}

func TestDSNSSLModeAndEffectiveMode(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:p@h:5432/db?sslmode=disable": "disable",
		"postgresql://u@h/db":                      "prefer",
		"host=h sslmode=verify-full dbname=x":      "verify-full",
		"host=h sslmode='require' dbname=x":        "require",
		"host=h dbname=x":                          "prefer",
	} {
		if got := dsnSSLMode(dsn); got != want {
			t.Errorf("dsnSSLMode(%q) = %q, want %q", dsn, got, want)
		}
	}
	if m := effectiveSSLMode(&Cluster{SSLMode: "require", RootCertificatePEM: "x"}); m != "verify-ca" {
		t.Fatalf("require with a root certificate: %s", m)
	}
	if m := effectiveSSLMode(&Cluster{SSLMode: "require"}); m != "require" {
		t.Fatalf("require: %s", m)
	}
}

func TestSCRAMVerifierFormat(t *testing.T) {
	v, err := scramVerifier("pw")
	if err != nil || !strings.HasPrefix(v, "SCRAM-SHA-256$4096:") || strings.Contains(v, "pw$") || strings.Count(v, "$") != 2 {
		t.Fatalf("verifier %q: %v", v, err)
	}
}

// A password of newPassword's has a verifier whose keys ScramKeys computes again from the password
// alone (its salt is derived from it): the keys a client then authenticates with are exactly the
// verifier's. A password made before (64 hex characters) keeps a random salt and gets no keys.
func TestScramKeysMatchTheVerifier(t *testing.T) {
	pw := newPassword()
	v1, err1 := scramVerifier(pw)
	v2, err2 := scramVerifier(pw)
	if err1 != nil || err2 != nil || v1 != v2 {
		t.Fatalf("verifiers of one new password differ: %q, %q (%v, %v)", v1, v2, err1, err2)
	}
	client, server, ok := ScramKeys(pw)
	if !ok {
		t.Fatal("no keys for a new password")
	}
	dec := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, keys, _ := strings.Cut(v1, "$")
	_, keys, _ = strings.Cut(keys, "$")
	stored, serverKey, _ := strings.Cut(keys, ":")
	if h := sha256.Sum256(dec(client)); !bytes.Equal(h[:], dec(stored)) || !bytes.Equal(dec(server), dec(serverKey)) {
		t.Fatalf("keys %s, %s do not match verifier %s", client, server, v1)
	}
	if c2, _, _ := ScramKeys(pw); c2 != client {
		t.Fatal("a second call gave other keys")
	}
	old := strings.Repeat("ab", 32)
	o1, _ := scramVerifier(old)
	o2, _ := scramVerifier(old)
	if o1 == o2 {
		t.Fatal("a password of the earlier form got a derived salt")
	}
	if _, _, ok := ScramKeys(old); ok {
		t.Fatal("keys for a password of the earlier form, whose verifier's salt is random")
	}
}
