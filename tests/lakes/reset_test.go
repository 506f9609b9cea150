package lakes_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

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

// TestResetForkKilledInTheLakePart kills the sidecar during the lake part of a reset (after the
// fork's metadata schema is dropped, before its files are; after the namespaces are gone, before
// the materialization records are) and just before it: after a restart the reset finishes once,
// and the fork reads the parent's table again from a namespace made again.
func TestResetForkKilledInTheLakePart(t *testing.T) {
	for _, point := range []string{"fork.reset.before_lakes", "lake.cleanup.after_schema_drop", "lake.reset.before_forget"} {
		t.Run(point, func(t *testing.T) {
			e, url := lakeEnv(t, storageKinds[0])
			e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
			e.workspace("dev", "prod")
			e.materialize("dev", "ducklake://main/orders", "SELECT range AS id, 1 AS amount FROM range(3000)", "replace")
			parentObjects := listKeys(t, url, "lakes/main/")
			if err := e.sidecar.Stop(time.Minute); err != nil {
				t.Logf("stop: %v", err)
			}
			crashEnv := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
			e.startSidecar(crashEnv...)
			var id uuid.UUID
			if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.reset_fork('dev')`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if err := e.sidecar.WaitExit(90 * time.Second); err != nil {
				t.Fatalf("the sidecar did not die at the crash point: %v", err)
			}
			e.startSidecar(crashEnv...) // the marker keeps it from dying at the same point twice
			if row := e.wait(id); row.Status != "succeeded" {
				t.Fatalf("reset_fork after the restart: %s %s", row.Status, deref(row.Error))
			}
			if got := queryString(t, e.conn, `SELECT attempts::text FROM dataenv.requests WHERE id = $1`, id); got == "1" {
				t.Fatal("the crash did not happen inside the handler")
			}
			if got := e.forkState("dev", "orders"); got != "deferred prod" {
				t.Fatalf("fork_materialization after the reset: %s", got)
			}
			if got := e.count("dev", "orders"); got != "2000" {
				t.Fatalf("dev reads %s rows after the reset, want the parent's 2000", got)
			}
			if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_namespaces WHERE workspace = 'dev'`); got != "1" {
				t.Fatalf("%s registry rows of the fork's namespaces, want 1 (made again)", got)
			}
			if keys := listKeys(t, url, names.ForkLakeDataPrefix("dev", "lakes/main")); len(keys) != 0 {
				t.Fatalf("fork files left: %v", keys)
			}
			if !reflect.DeepEqual(listKeys(t, url, "lakes/main/"), parentObjects) {
				t.Fatal("the parent's files changed")
			}
		})
	}
}
