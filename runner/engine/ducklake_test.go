package engine_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

// lake describes a DuckLake catalog in a harness Postgres database.
type lake struct {
	dsn, schema, dataPath string
	extra                 []string
}

// attach is the ATTACH statement of the lake, with the same non-default schema for DuckLake's
// tables (METADATA_SCHEMA) and for the postgres catalog it goes through (META_SCHEMA).
func (l lake) attach(alias string, opts ...string) string {
	o := append([]string{
		"DATA_PATH " + sqlString(l.dataPath),
		"METADATA_SCHEMA " + sqlString(l.schema),
		"META_SCHEMA " + sqlString(l.schema),
	}, append(l.extra, opts...)...)
	return fmt.Sprintf("ATTACH %s AS %s (%s)", sqlString("ducklake:postgres:"+l.dsn), alias, strings.Join(o, ", "))
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// run runs blocks on a new in-process DuckDB instance and fails the test on a DuckDB error.
func run(t *testing.T, blocks ...string) *protocol.Response {
	t.Helper()
	resp := runResp(t, blocks...)
	if resp.Error != "" {
		t.Fatalf("block %d: %s", resp.ErrorBlock, resp.Error)
	}
	return resp
}

func runResp(t *testing.T, blocks ...string) *protocol.Response {
	t.Helper()
	dir, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	req := &protocol.Request{Blocks: blocks, ExtensionDirectory: dir, CollectLastOnly: true,
		TempDirectory: filepath.Join(t.TempDir(), "spill")}
	return engine.Run(context.Background(), req, nil)
}

func newLake(t *testing.T, dataPath string, extra ...string) lake {
	db := pg.CreateDatabase(t)
	return lake{dsn: pg.DSN(db), schema: "lake_meta_" + strings.ToLower(pg.NamePrefix(t)), dataPath: dataPath, extra: extra}
}

// writeAndReadBack creates a table in a first DuckDB instance, closes it, and reads the rows
// back from a second one.
func writeAndReadBack(t *testing.T, l lake) {
	run(t, l.attach("lake"),
		"CREATE TABLE lake.events (id INTEGER, name VARCHAR)",
		"INSERT INTO lake.events SELECT range, 'event ' || range FROM range(1000)")
	resp := run(t, l.attach("lake"), "SELECT count(*), sum(id), max(name) FROM lake.events")
	got := string(resp.Results[0].Rows[0][0]) + " " + string(resp.Results[0].Rows[0][1]) + " " + string(resp.Results[0].Rows[0][2])
	if want := `1000 499500 "event 999"`; got != want {
		t.Fatalf("read back %s, want %s", got, want)
	}
}

func TestDuckLakeRoundTripLocal(t *testing.T) {
	dataPath := t.TempDir() + "/"
	l := newLake(t, dataPath)
	writeAndReadBack(t, l)
	checkCatalogOnlyIn(t, l)
	var parquet int
	filepath.WalkDir(dataPath, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			parquet++
		}
		return nil
	})
	if parquet == 0 {
		t.Fatalf("no parquet file under %s", dataPath)
	}
}

// checkCatalogOnlyIn checks with pgx that DuckLake's tables live in the lake's schema and in no
// other schema of the database.
func checkCatalogOnlyIn(t *testing.T, l lake) {
	t.Helper()
	db := l.dsn[strings.LastIndex(l.dsn, "/")+1 : strings.Index(l.dsn, "?")]
	conn := pg.Connect(t, db)
	rows, err := conn.Query(context.Background(), `
		SELECT table_schema, count(*) FROM information_schema.tables
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema')
		GROUP BY table_schema ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var schemas []string
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		schemas = append(schemas, fmt.Sprintf("%s:%d", s, n))
	}
	if len(schemas) != 1 || !strings.HasPrefix(schemas[0], l.schema+":") {
		t.Fatalf("tables per schema: %v; want only %s", schemas, l.schema)
	}
	var snapshot int
	q := fmt.Sprintf("SELECT count(*) FROM %s.ducklake_snapshot", l.schema)
	if err := conn.QueryRow(context.Background(), q).Scan(&snapshot); err != nil || snapshot == 0 {
		t.Fatalf("%s: %d, %v", q, snapshot, err)
	}
}

func TestDuckLakeReadOnlyAttachRefusesWrite(t *testing.T) {
	l := newLake(t, t.TempDir()+"/")
	run(t, l.attach("lake"), "CREATE TABLE lake.t AS SELECT 1 AS x")
	resp := runResp(t, l.attach("lake", "READ_ONLY"), "INSERT INTO lake.t VALUES (2)")
	if resp.ErrorBlock != 1 || !strings.Contains(resp.Error, "read-only") {
		t.Fatalf("write through a READ_ONLY attach: block %d error %q; want DuckDB's read-only error", resp.ErrorBlock, resp.Error)
	}
	resp = run(t, l.attach("lake", "READ_ONLY"), "SELECT count(*) FROM lake.t")
	if got := string(resp.Results[0].Rows[0][0]); got != "1" {
		t.Fatalf("rows after the refused write: %s, want 1", got)
	}
}
