package lakes_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/names"
)

// resetFork resets fork through dataenv.reset_fork; the request must succeed.
func (e *env) resetFork(fork string) map[string]any {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.reset_fork($1)`, fork).Scan(&id); err != nil {
		e.t.Fatalf("reset_fork: %v", err)
	}
	row := e.wait(id)
	if row.Status != "succeeded" {
		e.t.Fatalf("reset_fork %s: %s %s", fork, row.Status, deref(row.Error))
	}
	var out map[string]any
	_ = json.Unmarshal(row.Result, &out)
	return out
}

// A table the fork materialized is gone after reset_fork: the fork reads the parent's version
// again (live, through a defer view), its files are deleted, the parent's are untouched, and a
// table the fork made that the parent never had is gone too.
func TestResetForkDefersToTheParentAgain(t *testing.T) {
	e, url := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/orders", "SELECT range AS id, 1 AS amount FROM range(3000)", "replace")
	e.materialize("dev", "ducklake://main/scratch", "SELECT 42 AS x", "replace")
	if got := e.count("dev", "orders"); got != "3000" {
		t.Fatalf("dev reads %s rows of its own orders, want 3000", got)
	}
	if got := e.forkState("dev", "orders"); got != "fork-materialized" {
		t.Fatalf("fork_materialization before the reset: %s", got)
	}
	forkPrefix := names.ForkLakeDataPrefix("dev", "lakes/main")
	parentObjects, parentCatalog := listKeys(t, url, "lakes/main/"), e.catalogState("public")
	e.materialize("prod", "ducklake://main/orders", "SELECT 5000 AS id, 1 AS amount", "append") // the parent moves on

	res := e.resetFork("dev")
	if lakes, _ := res["lakes"].(map[string]any); lakes == nil || lakes["materializations_forgotten"] != float64(2) {
		t.Errorf("reset result lakes: %v", res["lakes"])
	}
	if got := e.forkState("dev", "orders"); got != "deferred prod" {
		t.Fatalf("fork_materialization after the reset: %s", got)
	}
	if got := e.count("dev", "orders"); got != "2001" {
		t.Fatalf("dev reads %s rows of orders after the reset, want the parent's current 2001", got)
	}
	if got := e.liveViews(names.ForkLakeSchema("dev", "main")); !reflect.DeepEqual(got, []string{"orders"}) {
		t.Fatalf("fork views after the reset: %v, want the defer view of orders", got)
	}
	if row := e.runRow("dev", attachMain+"SELECT * FROM dl.scratch"); row.Status == "succeeded" {
		t.Fatal("the fork's own table scratch is still readable after the reset")
	}
	if keys := listKeys(t, url, forkPrefix); len(keys) != 0 {
		t.Fatalf("fork files left after the reset: %v", keys)
	}
	if got := e.catalogState("public"); got == parentCatalog {
		t.Fatalf("the parent's append is not in its catalog")
	}
	for _, k := range parentObjects {
		found := false
		for _, now := range listKeys(t, url, "lakes/main/") {
			found = found || now == k
		}
		if !found {
			t.Fatalf("the reset removed the parent's file %s", k)
		}
	}
	// The fork works as before: it materializes again, in its namespace.
	e.materialize("dev", "ducklake://main/orders", "SELECT 2 AS id, 2 AS amount", "replace")
	if got := e.count("dev", "orders"); got != "1" {
		t.Fatalf("dev reads %s rows after materializing again", got)
	}
	if got := e.count("prod", "orders"); got != "2001" {
		t.Fatalf("prod reads %s rows", got)
	}
}
