package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The sidecar imports this package and builds with CGO_ENABLED=0: nothing here may pull DuckDB
// or cgo in.
func TestClientIsCgoFree(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "github.com/dataenv/dataenv/runner/client")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list with CGO_ENABLED=0: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "duckdb") || dep == "runtime/cgo" {
			t.Fatalf("runner/client depends on %s", dep)
		}
	}
}
