package lake

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// A job's postgres secret carries the workspace role's SCRAM keys when the libpq settings have
// them (the attach then derives nothing), beside the password; they are scrubbed like it, and a
// member's own script never gets them. Without keys, the secret is the password alone.
func TestCatalogSecretCarriesTheScramKeys(t *testing.T) {
	env := []string{"PGHOST=h", "PGPORT=5432", "PGUSER=ws", "PGDATABASE=cat", "PGPASSWORD=pw"}
	c := newCatalogs(nil, "prod")
	c.ConnWith(context.Background(), "c1", "cat", &cluster.Libpq{Env: env, ScramClientKey: "Q0s=", ScramServerKey: "U0s="})
	if len(c.setup) != 1 || !strings.Contains(c.setup[0], "SCRAM_CLIENT_KEY 'Q0s='") || !strings.Contains(c.setup[0], "SCRAM_SERVER_KEY 'U0s='") ||
		!strings.Contains(c.setup[0], "PASSWORD 'pw'") {
		t.Fatalf("the job's secret: %v", c.setup)
	}
	if !slices.Contains(c.secrets, "Q0s=") || !slices.Contains(c.secrets, "U0s=") {
		t.Fatalf("the keys are not scrubbed: %v", c.secrets)
	}
	if strings.Contains(strings.Join(c.tools, " "), "Q0s=") {
		t.Fatalf("a member's script gets the keys: %v", c.tools)
	}
	plain := newCatalogs(nil, "prod")
	plain.ConnWith(context.Background(), "c1", "cat", &cluster.Libpq{Env: env})
	if strings.Contains(plain.setup[0], "SCRAM_") {
		t.Fatalf("keys in a secret without them: %v", plain.setup)
	}
}
