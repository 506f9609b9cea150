package lakes_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// count runs SELECT count(*) FROM dl.<table> in workspace.
func (e *env) count(workspace, table string) string {
	e.t.Helper()
	return e.run(workspace, attachMain+"SELECT count(*) FROM dl."+table).rowsText()
}

// catalogState is what a lake's catalog holds: rows per DuckLake table of the schema.
func (e *env) catalogState(schema string) string {
	e.t.Helper()
	conn := pg.Connect(e.t, e.catalog)
	var parts []string
	for _, tbl := range []string{"ducklake_snapshot", "ducklake_table", "ducklake_data_file", "ducklake_view"} {
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM %s.%s`, schema, tbl)
		if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
			e.t.Fatalf("%s: %v", q, err)
		}
		parts = append(parts, fmt.Sprintf("%s=%d", tbl, n))
	}
	return strings.Join(parts, " ")
}

// liveViews lists the live views of a DuckLake schema in the test's catalog database.
func (e *env) liveViews(schema string) []string {
	e.t.Helper()
	conn := pg.Connect(e.t, e.catalog)
	rows, err := conn.Query(context.Background(), fmt.Sprintf(`SELECT view_name FROM %s.ducklake_view WHERE end_snapshot IS NULL ORDER BY 1`, schema))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		rows.Scan(&v)
		out = append(out, v)
	}
	return out
}

func (e *env) forkState(fork, table string) string {
	e.t.Helper()
	var state, from string
	err := e.conn.QueryRow(context.Background(), `SELECT state, coalesce(from_workspace, '') FROM dataenv.fork_materialization
		WHERE workspace = $1 AND lake = 'main' AND table_name = $2`, fork, table).Scan(&state, &from)
	if err != nil {
		e.t.Fatalf("fork_materialization of %s/%s: %v", fork, table, err)
	}
	return strings.TrimSuffix(state+" "+from, " ")
}

const ordersQuery = attachMain + "SELECT range AS id, range * 10 AS amount FROM range(2000)"

// An isolated fork reads the parent's table through a defer view (live: it sees rows the parent
// adds later); once it materializes the table itself it reads its own rows, the view is gone,
// and the parent's files and catalog are unchanged.
func TestForkDeferThenMaterialize(t *testing.T) {
	for _, sk := range storageKinds {
		t.Run(sk.name, func(t *testing.T) {
			e, url := lakeEnv(t, sk)
			e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
			e.workspace("dev", "prod")
			if got := e.count("dev", "orders"); got != "2000" {
				t.Fatalf("dev reads %s rows of orders, want the parent's 2000", got)
			}
			if got := e.forkState("dev", "orders"); got != "deferred prod" {
				t.Fatalf("fork_materialization: %s", got)
			}
			e.materialize("prod", "ducklake://main/orders", "SELECT 5000 AS id, 1 AS amount", "append")
			if got := e.count("dev", "orders"); got != "2001" {
				t.Fatalf("after the parent appended, dev reads %s rows, want 2001", got)
			}
			schema := names.ForkLakeSchema("dev", "main")
			if got := e.liveViews(schema); !reflect.DeepEqual(got, []string{"orders"}) {
				t.Fatalf("fork views %v", got)
			}
			parentObjects, parentCatalog := listKeys(t, url, "lakes/main/"), e.catalogState("public")

			e.materialize("dev", "ducklake://main/orders", attachMain+"SELECT id, amount + 1 AS amount FROM dl.orders WHERE id < 3000", "replace")
			if got := e.run("dev", attachMain+"SELECT count(*), min(amount) FROM dl.orders").rowsText(); got != "2000,1" {
				t.Fatalf("dev reads %s after its own materialize, want 2000,1", got)
			}
			if got := e.liveViews(schema); len(got) != 0 {
				t.Fatalf("defer view still there: %v", got)
			}
			if got := e.forkState("dev", "orders"); got != "fork-materialized" {
				t.Fatalf("fork_materialization: %s", got)
			}
			if got := listKeys(t, url, "lakes/main/"); !reflect.DeepEqual(got, parentObjects) {
				t.Fatalf("parent objects changed:\nbefore %v\nafter  %v", parentObjects, got)
			}
			if got := e.catalogState("public"); got != parentCatalog {
				t.Fatalf("parent catalog changed: %s -> %s", parentCatalog, got)
			}
			if got := e.count("prod", "orders"); got != "2001" {
				t.Fatalf("prod reads %s rows", got)
			}
			forkKeys := listKeys(t, url, names.ForkLakeDataPrefix("dev", "lakes/main"))
			if len(forkKeys) == 0 {
				t.Fatalf("no fork files under %s", names.ForkLakeDataPrefix("dev", "lakes/main"))
			}
		})
	}
}

// fork → child → grandchild where only the root owns a table: the grandchild reads the root's;
// after the child materializes it, the grandchild reads the child's.
func TestForkChainDefersToNearestOwner(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("child", "prod")
	e.workspace("grandchild", "child")
	if got := e.count("grandchild", "orders"); got != "2000" {
		t.Fatalf("grandchild reads %s, want the root's 2000", got)
	}
	if got := e.forkState("grandchild", "orders"); got != "deferred prod" {
		t.Fatalf("fork_materialization: %s", got)
	}
	e.materialize("child", "ducklake://main/orders", "SELECT 1 AS id, 2 AS amount", "replace")
	if got := e.count("grandchild", "orders"); got != "1" {
		t.Fatalf("grandchild reads %s rows after the child materialized, want the child's 1", got)
	}
	if got := e.forkState("grandchild", "orders"); got != "deferred child" {
		t.Fatalf("fork_materialization: %s", got)
	}
	if got := e.count("child", "orders"); got != "1" {
		t.Fatalf("child reads %s", got)
	}
	if got := e.count("prod", "orders"); got != "2000" {
		t.Fatalf("prod reads %s", got)
	}
}

// A shared lake writes the parent's namespace; a fork of that fork is isolated again.
func TestSharedLakeAndForkOfSharedFork(t *testing.T) {
	e, url := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("backfill", "prod", "main")
	e.materialize("backfill", "ducklake://main/extra", attachMain+"SELECT * FROM dl.orders WHERE id < 1500", "replace")
	if got := e.count("prod", "extra"); got != "1500" {
		t.Fatalf("prod reads %s rows of the shared fork's table, want 1500", got)
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_namespaces WHERE workspace = 'backfill'`); got != "0" {
		t.Fatalf("a shared lake registered %s fork namespaces", got)
	}
	e.workspace("sub", "backfill")
	if got := queryString(t, e.conn, `SELECT fork_behavior FROM dataenv.lake_info WHERE workspace = 'sub'`); got != "isolated" {
		t.Fatalf("fork of a shared fork: %s", got)
	}
	e.materialize("sub", "ducklake://main/extra", "SELECT 1 AS id", "replace")
	if got := e.count("sub", "extra"); got != "1" {
		t.Fatalf("sub reads %s", got)
	}
	if got := e.count("prod", "extra"); got != "1500" {
		t.Fatalf("sub's write reached prod: %s rows", got)
	}
	if got := e.count("sub", "orders"); got != "2000" {
		t.Fatalf("sub defers orders through the shared fork to prod: %s", got)
	}
	_ = url
}

// A fork job that tries to escape its namespace with METADATA_SCHEMA or DATA_PATH options still
// writes only the fork's; a write through an ancestor alias fails (READ_ONLY).
func TestForkCannotEscapeItsNamespace(t *testing.T) {
	e, url := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	parentObjects, parentCatalog := listKeys(t, url, "lakes/main/"), e.catalogState("public")
	dir := strings.TrimPrefix(url, "file://")
	e.run("dev", fmt.Sprintf(`ATTACH 'ducklake://main' AS dl (METADATA_SCHEMA 'public', META_SCHEMA 'public', DATA_PATH '%s/lakes/main/', OVERRIDE_DATA_PATH TRUE);
		CREATE TABLE dl.escaped AS SELECT range AS id FROM range(3000)`, dir))
	if got := e.count("dev", "escaped"); got != "3000" {
		t.Fatalf("dev reads %s rows of its table", got)
	}
	if got := listKeys(t, url, "lakes/main/"); !reflect.DeepEqual(got, parentObjects) {
		t.Fatalf("parent objects changed:\nbefore %v\nafter  %v", parentObjects, got)
	}
	if got := e.catalogState("public"); got != parentCatalog {
		t.Fatalf("parent catalog changed: %s -> %s", parentCatalog, got)
	}
	alias := names.AncestorAlias("main", "prod")
	row := e.runRow("dev", attachMain+"INSERT INTO "+alias+".orders VALUES (1, 1)")
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "read-only") {
		t.Fatalf("write through the ancestor alias: %s %s", row.Status, deref(row.Error))
	}
	if got := e.count("prod", "orders"); got != "2000" {
		t.Fatalf("prod has %s rows", got)
	}
	// Jailed (the default where bubblewrap is installed), the parent's data directory is mounted
	// read-only in a fork's job: a raw write there fails too.
	row = e.runRow("dev", attachMain+fmt.Sprintf("COPY (SELECT 1 AS x) TO '%s/lakes/main/evil.csv'", dir))
	if row.Status != "failed" {
		t.Fatalf("a fork job wrote into the parent's data directory")
	}
	if got := listKeys(t, url, "lakes/main/"); !reflect.DeepEqual(got, parentObjects) {
		t.Fatalf("parent objects changed: %v", got)
	}
}

// An orphaned fork (parent dropped) keeps the write redirect and the registry, without defer.
func TestOrphanedForkStaysIsolated(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	mustExec(t, e.conn, `UPDATE dataenv.workspaces SET parent = NULL WHERE id = 'dev'`)
	e.materialize("dev", "ducklake://main/mine", "SELECT 42 AS x", "replace")
	if got := e.run("dev", attachMain+"SELECT x FROM dl.mine").rowsText(); got != "42" {
		t.Fatalf("orphan reads %s", got)
	}
	row := e.runRow("prod", attachMain+"SELECT * FROM dl.mine")
	if row.Status != "failed" {
		t.Fatalf("the orphan's table reached prod")
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_namespaces WHERE workspace = 'dev'`); got != "1" {
		t.Fatalf("registry rows of the orphan: %s", got)
	}
}
