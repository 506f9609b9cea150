package engine_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
)

// The three extensions load from the extension directory, signatures checked (the runner never
// sets allow_unsigned_extensions).
func TestRequiredExtensionsLoad(t *testing.T) {
	ctx := context.Background()
	dir, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if err := extension.Check(dir); err != nil {
		t.Fatal(err)
	}
	in, err := engine.Open(ctx, dir, extension.Required...)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	conn := in.Conn
	var unsigned bool
	if err := conn.QueryRowContext(ctx, "SELECT current_setting('allow_unsigned_extensions')").Scan(&unsigned); err != nil {
		t.Fatal(err)
	}
	if unsigned {
		t.Fatal("allow_unsigned_extensions is on")
	}
	var n int
	q := "SELECT count(*) FROM duckdb_extensions() WHERE loaded AND extension_name IN ('ducklake','postgres_scanner','httpfs')"
	if err := conn.QueryRowContext(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("loaded extensions: %d, want 3", n)
	}
}
