package engine_test

import (
	"context"
	"os"
	"testing"
)

// A spare's warm-up runs a DuckLake job of its own and leaves nothing a job could see: no
// database attached, no secret, no file in the directory it was given.
func TestWarmUpLeavesNothingBehind(t *testing.T) {
	ctx := context.Background()
	in := openInstance(t)
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
