package lakes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

// cleanupResult is what the test-only kind test_lake_cleanup reports.
type cleanupResult struct {
	OK           bool   `json:"ok"`
	CleanupError bool   `json:"cleanup_error"`
	BlocksCreate bool   `json:"blocks_create"`
	Error        string `json:"error"`
}

// lakeCleanup runs the lake side of a fork's cleanup on its own, in the sidecar (the test-only
// request kind test_lake_cleanup), and returns what it reported.
func (e *env) lakeCleanup(fork string) cleanupResult {
	e.t.Helper()
	mustExec(e.t, e.conn, `INSERT INTO dataenv.request_kinds (kind, description) VALUES ('test_lake_cleanup', 'tests only') ON CONFLICT DO NOTHING`)
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `INSERT INTO dataenv.requests (kind, args) VALUES ('test_lake_cleanup', jsonb_build_object('fork', $1::text)) RETURNING id`, fork).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	row := e.wait(id)
	var r cleanupResult
	if row.Status != "succeeded" || json.Unmarshal(row.Result, &r) != nil {
		e.t.Fatalf("test_lake_cleanup %s: %s %s", fork, row.Status, deref(row.Error))
	}
	return r
}

func (e *env) schemaExists(schema string) bool {
	e.t.Helper()
	conn := pg.Connect(e.t, e.catalog)
	var ok bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
		e.t.Fatal(err)
	}
	return ok
}

// dropWorkspace removes the workspace row the way drop_fork does before it calls the cleaners.
func (e *env) dropWorkspace(id string) {
	mustExec(e.t, e.conn, `DELETE FROM dataenv.workspaces WHERE id = $1`, id)
}

// drop_fork's lake cleanup removes the fork's schema and files and nothing else; a storage outage
// leaves the row with schema_dropped set, and a later run sweeps the files.
func TestCleanupFork(t *testing.T) {
	for _, sk := range storageKinds {
		t.Run(sk.name, func(t *testing.T) {
			e, url := lakeEnv(t, sk)
			e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
			e.workspace("dev", "prod")
			e.workspace("dev2", "prod")
			e.materialize("dev", "ducklake://main/orders", ordersQuery, "replace")
			e.materialize("dev", "ducklake://main/other", ordersQuery, "replace")
			e.materialize("dev2", "ducklake://main/orders", ordersQuery, "replace")
			devSchema, dev2Schema := names.ForkLakeSchema("dev", "main"), names.ForkLakeSchema("dev2", "main")
			devPrefix, dev2Prefix := names.ForkLakeDataPrefix("dev", "lakes/main"), names.ForkLakeDataPrefix("dev2", "lakes/main")
			parentObjects, parentCatalog := listKeys(t, url, "lakes/main/"), e.catalogState("public")
			dev2Objects, dev2Catalog := listKeys(t, url, dev2Prefix), e.catalogState(dev2Schema)
			if len(listKeys(t, url, devPrefix)) == 0 || !e.schemaExists(devSchema) {
				t.Fatal("the fork wrote nothing")
			}
			if r := e.lakeCleanup("dev"); !r.OK || !e.schemaExists(devSchema) {
				t.Fatalf("cleanup of a live fork: %+v; schema exists %t", r, e.schemaExists(devSchema))
			}
			e.dropWorkspace("dev")
			if sk.name == "s3" {
				// The storage is unreachable: the schema phase finishes, the data phase fails.
				mustExec(t, e.conn, `SELECT dataenv.update_storage_credentials('st', $1::jsonb)`, fmt.Sprintf(
					`{"endpoint": "http://127.0.0.1:1", "region": %q, "access_key_id": %q, "secret_access_key": %q}`, s3.Region, s3.AccessKey, s3.SecretKey))
				if r := e.lakeCleanup("dev"); !r.CleanupError || r.BlocksCreate {
					t.Fatalf("cleanup with the storage down: %+v", r)
				}
				if got := queryString(t, e.conn, `SELECT string_agg(schema_dropped::text, ',') FROM dataenv.fork_lake_namespaces WHERE workspace = 'dev'`); got != "true" {
					t.Fatalf("schema_dropped after the outage: %s", got)
				}
				if e.schemaExists(devSchema) || len(listKeys(t, url, devPrefix)) == 0 {
					t.Fatal("want the schema dropped and the files still there")
				}
				mustExec(t, e.conn, `SELECT dataenv.update_storage_credentials('st', $1::jsonb)`, fmt.Sprintf(
					`{"endpoint": "http://%s", "region": %q, "access_key_id": %q, "secret_access_key": %q}`, s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey))
			}
			if r := e.lakeCleanup("dev"); !r.OK {
				t.Fatalf("cleanup: %+v", r)
			}
			if e.schemaExists(devSchema) {
				t.Fatal("fork schema still there")
			}
			if got := listKeys(t, url, devPrefix); len(got) != 0 {
				t.Fatalf("fork files left: %v", got)
			}
			if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_namespaces WHERE workspace = 'dev'`); got != "0" {
				t.Fatalf("registry rows left: %s", got)
			}
			if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.lakes WHERE workspace = 'dev'`); got != "0" {
				t.Fatalf("lake rows left: %s", got)
			}
			if !reflect.DeepEqual(listKeys(t, url, "lakes/main/"), parentObjects) || e.catalogState("public") != parentCatalog {
				t.Fatal("the parent changed")
			}
			if !reflect.DeepEqual(listKeys(t, url, dev2Prefix), dev2Objects) || e.catalogState(dev2Schema) != dev2Catalog {
				t.Fatal("the sibling fork changed")
			}
			if r := e.lakeCleanup("dev"); !r.OK {
				t.Fatalf("a second cleanup: %+v", r)
			}
		})
	}
}

// A fork id whose previous incarnation left a metadata schema that cannot be dropped is not
// created again; nothing without the marker is ever dropped.
func TestCreateForkRefusedWhileOldSchemaRemains(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/t", "SELECT 1 AS x", "replace")
	schema := names.ForkLakeSchema("dev", "main")
	catalog := pg.Connect(t, e.catalog)
	mustExec(t, catalog, `COMMENT ON SCHEMA `+schema+` IS 'not dataenv''s'`)
	e.dropWorkspace("dev")
	if row := e.createFork("dev", "prod"); row.Status != "failed" || !strings.Contains(deref(row.Error), "lacks dataenv's marker") {
		t.Fatalf("create over an unmarked leftover schema: %s %s", row.Status, deref(row.Error))
	}
	if !e.schemaExists(schema) {
		t.Fatal("an unmarked schema was dropped")
	}
	mustExec(t, catalog, `COMMENT ON SCHEMA `+schema+` IS '`+names.Marker+`; lake fork namespace'`)
	if row := e.createFork("dev", "prod"); row.Status != "succeeded" {
		t.Fatalf("create after the leftover became droppable: %s %s", row.Status, deref(row.Error))
	}
	// The new fork has a namespace of its own again (create_fork makes it): a new schema, with
	// the new fork's marker, without the old fork's table.
	if got := queryString(t, catalog, `SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1`, schema); got != names.Marker+"; lake fork namespace; workspace dev; lake main" {
		t.Fatalf("the leftover schema was not dropped: its comment is %q", got)
	}
	if got := queryString(t, catalog, fmt.Sprintf(`SELECT count(*)::text FROM %s.ducklake_table WHERE table_name = 't' AND end_snapshot IS NULL`, schema)); got != "0" {
		t.Fatalf("the old fork's table is in the new namespace: %s", got)
	}
	if got := queryString(t, e.conn, `SELECT fork_behavior FROM dataenv.lakes WHERE workspace = 'dev'`); got != "isolated" {
		t.Fatalf("lakes of the new fork: %s", got)
	}
}

// drop_fork through the sidecar, killed right after the fork's metadata schema was dropped: the
// restarted sidecar finishes the request once, the files are swept, nothing of the parent moves.
func TestDropForkKilledMidCleanup(t *testing.T) {
	e := newEnv(t)
	url := storageKinds[0].setup(t, e)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	crashEnv := []string{"DATAENV_CRASH_AT=lake.cleanup.after_schema_drop", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	e.startSidecar(crashEnv...)
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/orders", ordersQuery, "replace")
	parentObjects, parentCatalog := listKeys(t, url, "lakes/main/"), e.catalogState("public")
	schema, prefix := names.ForkLakeSchema("dev", "main"), names.ForkLakeDataPrefix("dev", "lakes/main")
	var id string
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.drop_fork('dev')::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := e.sidecar.WaitExit(60 * time.Second); err != nil {
		t.Fatalf("the sidecar did not die at the crash point: %v", err)
	}
	if e.schemaExists(schema) || len(listKeys(t, url, prefix)) == 0 {
		t.Fatal("want the schema dropped and the files still there at the crash")
	}
	e.startSidecar(crashEnv...) // the marker keeps it from dying at the same point twice
	if row := e.wait(uuid.MustParse(id)); row.Status != "succeeded" {
		t.Fatalf("drop_fork after the restart: %s %s", row.Status, deref(row.Error))
	}
	if got := listKeys(t, url, prefix); len(got) != 0 {
		t.Fatalf("fork files left: %v", got)
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_namespaces`); got != "0" {
		t.Fatalf("registry rows left: %s", got)
	}
	if !reflect.DeepEqual(listKeys(t, url, "lakes/main/"), parentObjects) || e.catalogState("public") != parentCatalog {
		t.Fatal("the parent changed")
	}
}

// An unknown name in shared_lakes is refused when create_fork is called, not when it runs.
func TestCreateForkRefusesUnknownSharedLakeAtCallTime(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	_, err := e.conn.Exec(context.Background(), `SELECT dataenv.create_fork('prod', 'dev', '{}', ARRAY['nope'])`)
	if err == nil || !strings.Contains(err.Error(), "not a lake of workspace") {
		t.Fatalf("create_fork with an unknown shared lake: %v", err)
	}
	var n int
	if err := e.conn.QueryRow(context.Background(), `SELECT count(*) FROM dataenv.requests WHERE kind = 'create_fork'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d create_fork requests inserted (%v)", n, err)
	}
}

// A fork's metadata schema replaced by another of the same name and marker (what someone able
// to rename schemas in the catalog could do) is not dropped: the registry recorded the OID of
// the one dataenv made. The replacement and what it holds stay; the registry row stays too.
func TestCleanupRefusesAReplacedSchema(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/orders", ordersQuery, "replace")
	schema := names.ForkLakeSchema("dev", "main")
	if got := queryString(t, e.conn, `SELECT (schema_oid IS NOT NULL)::text FROM dataenv.fork_lake_namespaces WHERE workspace = 'dev'`); got != "true" {
		t.Fatalf("schema OID recorded: %s", got)
	}
	cat := pg.Connect(t, e.catalog)
	ctx := context.Background()
	var comment string
	if err := cat.QueryRow(ctx, `SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1`, schema).Scan(&comment); err != nil {
		t.Fatal(err)
	}
	id := pgx.Identifier{schema}.Sanitize()
	for _, sql := range []string{
		`ALTER SCHEMA ` + id + ` RENAME TO moved_aside`,
		`CREATE SCHEMA ` + id,
		`COMMENT ON SCHEMA ` + id + ` IS ` + quoteLiteral(comment),
		`CREATE TABLE ` + id + `.precious (x int)`,
	} {
		mustExec(t, cat, sql)
	}
	t.Cleanup(func() { cat.Exec(ctx, `DROP SCHEMA IF EXISTS moved_aside CASCADE`) })
	row := e.dropFork("dev")
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "not the") || !strings.Contains(deref(row.Error), "OID") {
		t.Fatalf("drop_fork of a fork whose schema was replaced: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, cat, `SELECT count(*)::text FROM pg_tables WHERE schemaname = $1 AND tablename = 'precious'`, schema); got != "1" {
		t.Fatal("the replacement schema's table was dropped")
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_namespaces WHERE workspace = 'dev'`); got != "1" {
		t.Fatalf("registry rows: %s, want the row kept", got)
	}
	mustExec(t, cat, `DROP SCHEMA `+id+` CASCADE`)
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
