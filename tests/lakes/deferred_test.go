package lakes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// materializeSeed is materialize(..., 'append', seed_from_parent => seed) in workspace.
func (e *env) materializeSeed(workspace, target, query string, seed bool) map[string]any {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.materialize($1, $2, $3, strategy => 'append', seed_from_parent => $4)`,
		workspace, target, query, seed).Scan(&id); err != nil {
		e.t.Fatalf("dataenv.materialize: %v", err)
	}
	row := e.wait(id)
	if row.Status != "succeeded" {
		e.t.Fatalf("append to %s in %s: %s %s", target, workspace, row.Status, deref(row.Error))
	}
	var out map[string]any
	_ = json.Unmarshal(row.Result, &out)
	return out
}

// An append in a fork onto a table the fork reads from its parent starts from the parent's rows
// (seed_from_parent, the default), and says so; seed_from_parent => false starts empty, and says
// that too. The parent is unchanged either way.
func TestAppendOntoDeferredTable(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	m := e.materialize("dev", "ducklake://main/orders", "SELECT 5000 + range AS id, 1 AS amount FROM range(10)", "append")
	if m["row_count"] != float64(10) || m["total_rows"] != float64(2010) || m["seeded_from"] != "prod" || m["seeded_rows"] != float64(2000) {
		t.Fatalf("append onto a deferred table (default seed): %v", m)
	}
	if got := e.count("dev", "orders"); got != "2010" {
		t.Fatalf("dev reads %s rows after the append", got)
	}
	if got := e.forkState("dev", "orders"); got != "fork-materialized" {
		t.Fatalf("fork_materialization after the append: %s", got)
	}
	// A second append is an ordinary one: the table is the fork's now.
	m = e.materialize("dev", "ducklake://main/orders", "SELECT 6000 AS id, 1 AS amount", "append")
	if m["total_rows"] != float64(2011) || m["seeded_from"] != nil {
		t.Fatalf("second append: %v", m)
	}

	e.workspace("dev2", "prod")
	m = e.materializeSeed("dev2", "ducklake://main/orders", "SELECT 5000 + range AS id, 1 AS amount FROM range(10)", false)
	if m["total_rows"] != float64(10) || m["seeded_from"] != nil || !strings.Contains(fmt.Sprint(m["notes"]), "seed_from_parent => false") {
		t.Fatalf("append with seed_from_parent => false: %v", m)
	}
	if got := e.count("prod", "orders"); got != "2000" {
		t.Fatalf("prod has %s rows", got)
	}
	if msg := execErr(t, e.conn, `INSERT INTO dataenv.requests (kind, args) VALUES ('materialize',
		'{"workspace": "dev", "target": "ducklake://main/orders", "query": "SELECT 1", "seed_from_parent": "yes"}')`); !strings.Contains(msg, "seed_from_parent must be true or false") {
		t.Fatalf("a non-boolean seed_from_parent: %s", msg)
	}
}

// drop_workspace refuses while a fork reads lake tables of the workspace, naming the fork and the
// tables, and hints at the materialize that gives the fork its own copy. Once the fork has it,
// the drop succeeds and the orphaned fork keeps reading its table.
func TestDropWorkspaceWhileForksDefer(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.materialize("prod", "ducklake://main/items", attachMain+"SELECT 1 AS id", "replace")
	e.workspace("dev", "prod")
	if got := e.count("dev", "orders"); got != "2000" { // the defer views exist in dev's catalog now
		t.Fatalf("dev reads %s", got)
	}
	msg := execErr(t, e.conn, `SELECT dataenv.drop_workspace('prod')`)
	if !strings.Contains(msg, `forks read lake tables of workspace "prod" (deferred): dev (main.items, main.orders)`) {
		t.Fatalf("drop_workspace with a deferring fork: %s", msg)
	}
	hint := hintOf(t, e, `SELECT dataenv.drop_workspace('prod')`)
	if !strings.Contains(hint, `SELECT dataenv.materialize('dev', 'ducklake://main/items', 'ATTACH ''ducklake://main'' AS dl; SELECT * FROM dl.items');`) {
		t.Fatalf("hint: %s", hint)
	}
	// The hint's statement, for both tables.
	for _, tbl := range []string{"orders", "items"} {
		e.materialize("dev", "ducklake://main/"+tbl, attachMain+"SELECT * FROM dl."+tbl, "replace")
	}
	mustExec(t, e.conn, `SELECT dataenv.drop_workspace('prod')`)
	if got := e.count("dev", "orders"); got != "2000" {
		t.Fatalf("the orphaned fork reads %s rows of its orders", got)
	}
	if got := queryString(t, e.conn, `SELECT format('%s lakes, %s materializations', (SELECT count(*) FROM dataenv.lakes WHERE workspace = 'prod'),
		(SELECT count(*) FROM dataenv.materializations WHERE workspace = 'prod'))`); got != "0 lakes, 0 materializations" {
		t.Fatalf("after drop_workspace, prod keeps %s", got)
	}
}

// A fork dropped and made again under the same id defers again: the old incarnation's record of
// what it materialized went with it.
func TestRecreatedForkDefersAgain(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/orders", "SELECT 1 AS id, 1 AS amount", "replace")
	if row := e.dropFork("dev"); row.Status != "succeeded" {
		t.Fatalf("drop_fork: %s %s", row.Status, deref(row.Error))
	}
	e.workspace("dev", "prod")
	if got := e.forkState("dev", "orders"); got != "deferred prod" {
		t.Fatalf("the new fork dev: %s", got)
	}
	if got := e.count("dev", "orders"); got != "2000" {
		t.Fatalf("the new fork dev reads %s rows", got)
	}
}

// hintOf runs sql, which must fail, and returns the error's HINT.
func hintOf(t *testing.T, e *env, sql string) string {
	t.Helper()
	_, err := e.conn.Exec(context.Background(), sql)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("%s: %v, want a PostgreSQL error", sql, err)
	}
	return pgErr.Hint
}
