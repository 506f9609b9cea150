package engine_test

import (
	"context"
	"os"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
)

// A spare's warm-up runs a DuckLake job of its own and leaves nothing a job could see: no
// database attached, no secret, no file in the directory it was given.
func TestWarmUpLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	dir, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	in, err := engine.Open(ctx, dir, extension.Required...)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	work := t.TempDir()
	if err := in.WarmUp(ctx, work); err != nil {
		t.Fatal(err)
	}
	var dbs, secrets int
	if err := in.Conn.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory'").Scan(&dbs); err != nil {
		t.Fatal(err)
	}
	if err := in.Conn.QueryRowContext(ctx, "SELECT count(*) FROM duckdb_secrets()").Scan(&secrets); err != nil {
		t.Fatal(err)
	}
	if dbs != 0 || secrets != 0 {
		t.Fatalf("after the warm-up: %d databases attached, %d secrets", dbs, secrets)
	}
	entries, err := os.ReadDir(work)
	if err != nil || len(entries) != 0 {
		t.Fatalf("the warm-up left %v in its directory (%v)", entries, err)
	}
}
