package cluster

import (
	"bytes"
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
