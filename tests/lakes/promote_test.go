package lakes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

// promote asks dataenv.promote as the env's superuser and waits for the request.
func (e *env) promote(fork, target string, force bool) sidecartest.Row {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.promote($1, $2, force => $3)`, fork, target, force).Scan(&id); err != nil {
		e.t.Fatalf("dataenv.promote: %v", err)
	}
	return e.wait(id)
}

// parentFilesFromFork counts the live data files of the parent's catalog (schema public) whose
// path is under a fork's data prefix.
func (e *env) parentFilesFromFork() string {
	e.t.Helper()
	return queryString(e.t, pg.Connect(e.t, e.catalog), `SELECT count(*)::text FROM public.ducklake_data_file f
		LEFT JOIN public.ducklake_table t ON t.table_id = f.table_id AND t.end_snapshot IS NULL
		WHERE f.end_snapshot IS NULL AND (f.path LIKE '%__dataenv_forks%' OR t.path LIKE '%__dataenv_forks%')`)
}

// A fork's materialized table promoted into its parent: the parent reads the fork's rows from one
// new snapshot whose files are under the parent's own data path (and still reads them once the
// fork is dropped), the materialization is recorded as the parent's (replace, promoted_from), and
// the fork defers the table to the parent again.
func TestPromoteForkTable(t *testing.T) {
	for _, sk := range storageKinds {
		t.Run(sk.name, func(t *testing.T) {
			e, url := lakeEnv(t, sk)
			e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
			e.workspace("dev", "prod")
			e.materialize("dev", "ducklake://main/orders", attachMain+"SELECT id, amount, 'fork' AS origin FROM dl.orders WHERE id < 1500", "replace")
			parentKeys, snapshots := len(listKeys(t, url, "lakes/main/")), e.catalogState("public")

			row := e.promote("dev", "ducklake://main/orders", false)
			if row.Status != "succeeded" {
				t.Fatalf("promote: %s %s", row.Status, deref(row.Error))
			}
			var res map[string]any
			_ = json.Unmarshal(row.Result, &res)
			if res["promoted_from"] != "dev" || res["workspace"] != "prod" || res["row_count"] != float64(1500) || res["fork_records_forgotten"] != float64(1) {
				t.Fatalf("promote result %s", row.Result)
			}
			if got := e.run("prod", attachMain+"SELECT count(*), min(origin), max(id) FROM dl.orders").rowsText(); got != "1500,fork,1499" {
				t.Fatalf("prod reads %s after the promote, want the fork's 1500 rows", got)
			}
			if got := queryString(t, e.conn, `SELECT strategy || ' ' || source || ' ' || coalesce(promoted_from, '-') || ' ' || row_count
				FROM dataenv.materialization_list WHERE workspace = 'prod' AND table_name = 'orders'`); got != "replace job dev 1500" {
				t.Fatalf("prod's latest materialization: %s", got)
			}
			// One snapshot more in the parent's catalog, files of its own (enough rows not to be
			// inlined in the catalog).
			before, after := snapshotCount(t, snapshots), snapshotCount(t, e.catalogState("public"))
			if after != before+1 {
				t.Fatalf("parent snapshots %d -> %d, want one new snapshot", before, after)
			}
			if got := len(listKeys(t, url, "lakes/main/")); got <= parentKeys {
				t.Fatalf("no new files under the parent's data path (%d -> %d)", parentKeys, got)
			}
			if got := e.parentFilesFromFork(); got != "0" {
				t.Fatalf("%s of the parent's data files are the fork's", got)
			}
			// The fork defers the table again and reads the promoted rows through the view.
			if got := e.forkState("dev", "orders"); got != "deferred prod" {
				t.Fatalf("fork_materialization after the promote: %s", got)
			}
			if got := e.run("dev", attachMain+"SELECT count(*), min(origin) FROM dl.orders").rowsText(); got != "1500,fork" {
				t.Fatalf("dev reads %s, want the promoted rows", got)
			}
			if got := e.liveViews(names.ForkLakeSchema("dev", "main")); len(got) != 1 || got[0] != "orders" {
				t.Fatalf("fork views %v, want the defer view of orders", got)
			}
			// The parent's role was given the fork's namespace for the job only.
			if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.lake_namespace_access
				WHERE workspace = 'prod' AND metadata_schema = $1`, names.ForkLakeSchema("dev", "main")); got != "0" {
				t.Fatalf("prod keeps %s access record(s) to the fork's namespace", got)
			}
			role := queryString(t, e.conn, `SELECT role::text FROM dataenv.workspace_roles WHERE workspace = 'prod' AND cluster = 'instance'`)
			if got := queryString(t, pg.Connect(t, e.catalog), `SELECT has_schema_privilege($1, $2, 'USAGE')::text`,
				role, names.ForkLakeSchema("dev", "main")); got != "false" {
				t.Fatalf("prod's role %s keeps USAGE on the fork's schema: %s", role, got)
			}

			if row := e.dropFork("dev"); row.Status != "succeeded" {
				t.Fatalf("drop_fork: %s %s", row.Status, deref(row.Error))
			}
			if got := e.run("prod", attachMain+"SELECT count(*), min(origin) FROM dl.orders").rowsText(); got != "1500,fork" {
				t.Fatalf("prod reads %s after the fork was dropped", got)
			}
		})
	}
}

// snapshotCount reads ducklake_snapshot=N out of catalogState.
func snapshotCount(t *testing.T, state string) int {
	t.Helper()
	for _, f := range strings.Fields(state) {
		if v, ok := strings.CutPrefix(f, "ducklake_snapshot="); ok {
			var n int
			if err := json.Unmarshal([]byte(v), &n); err == nil {
				return n
			}
		}
	}
	t.Fatalf("no snapshot count in %q", state)
	return 0
}

// A promote is refused, with nothing changed, when the parent's table changed after the fork
// materialized its version (unless force), when the fork has not materialized the table, for a
// root workspace, a shared lake, a protected parent, and for a member of both who does not own
// the parent; force => true overwrites the parent's change.
func TestPromoteRefusals(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.materialize("prod", "ducklake://main/customers", attachMain+"SELECT 1 AS id", "replace")
	e.workspace("dev", "prod")
	e.workspace("team", "prod", "main")
	e.materialize("dev", "ducklake://main/orders", "SELECT 1 AS id, 1 AS amount", "replace")
	e.materialize("prod", "ducklake://main/orders", "SELECT 9000 AS id, 9 AS amount", "append")
	before := e.catalogState("public")

	for sql, want := range map[string]string{
		`SELECT dataenv.promote('dev', 'ducklake://main/orders')`:    "after fork \"dev\" materialized its version",
		`SELECT dataenv.promote('dev', 'ducklake://main/customers')`: "has not materialized",
		`SELECT dataenv.promote('prod', 'ducklake://main/orders')`:   "is not a fork",
		`SELECT dataenv.promote('team', 'ducklake://main/orders')`:   "is shared with its parent",
		`SELECT dataenv.promote('dev', 'ducklake://main/nope')`:      "has not materialized",
	} {
		if got := execErr(t, e.conn, sql); !strings.Contains(got, want) {
			t.Errorf("%s: %s, want %q", sql, got, want)
		}
	}
	// The sidecar applies the same rules to a request that reached it without the insert checks.
	row := e.wait(e.bypass("promote", map[string]any{"fork": "dev", "parent": "prod", "target": "ducklake://main/orders"},
		queryString(t, e.conn, `SELECT current_user::text`)))
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "materialized its version") {
		t.Fatalf("a stale promote past the insert checks: %s %s", row.Status, deref(row.Error))
	}
	// A member of both workspaces who does not own the parent.
	member := e.stranger()
	name := queryString(t, member, `SELECT current_user::text`)
	for _, ws := range []string{"prod", "dev"} {
		mustExec(t, e.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, name)
	}
	if got := execErr(t, member, `SELECT dataenv.promote('dev', 'ducklake://main/orders', force => true)`); !strings.Contains(got, "is not the owner of workspace \"prod\"") {
		t.Errorf("a member who does not own the parent: %s", got)
	}
	row = e.wait(e.bypass("promote", map[string]any{"fork": "dev", "parent": "prod", "target": "ducklake://main/orders", "force": true}, name))
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "promote: permission denied: ") {
		t.Fatalf("the sidecar ran a member's promote: %s %s", row.Status, deref(row.Error))
	}
	mustExec(t, e.conn, `SELECT dataenv.protect_workspace('prod')`)
	if got := execErr(t, e.conn, `SELECT dataenv.promote('dev', 'ducklake://main/orders', force => true)`); !strings.Contains(got, "is protected") {
		t.Errorf("promote into a protected parent: %s", got)
	}
	mustExec(t, e.conn, `SELECT dataenv.unprotect_workspace('prod')`)
	if got := e.catalogState("public"); got != before {
		t.Fatalf("refused promotes changed the parent's catalog: %s -> %s", before, got)
	}
	if got := e.count("prod", "orders"); got != "2001" {
		t.Fatalf("prod reads %s rows after the refusals", got)
	}

	if row := e.promote("dev", "ducklake://main/orders", true); row.Status != "succeeded" {
		t.Fatalf("promote with force: %s %s", row.Status, deref(row.Error))
	}
	if got := e.run("prod", attachMain+"SELECT count(*), max(id) FROM dl.orders").rowsText(); got != "1,1" {
		t.Fatalf("prod reads %s after the forced promote, want the fork's row", got)
	}
	if got := e.forkState("dev", "orders"); got != "deferred prod" {
		t.Fatalf("fork_materialization after the promote: %s", got)
	}
}

// A sidecar killed in a promote, once after the parent's write committed and before it was
// recorded, once after the record and before the fork gave up its table: the restarted sidecars
// finish the request once (one new snapshot in the parent, one record), and the fork defers.
func TestPromoteKilledMidway(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/orders", "SELECT range AS id, 0 AS amount FROM range(1500)", "replace")
	before := snapshotCount(t, e.catalogState("public"))
	if err := e.sidecar.Stop(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	markers := t.TempDir()
	e.startSidecar("DATAENV_CRASH_AT=job.materialize.after_write,job.promote.after_write", "DATAENV_CRASH_MARKER_DIR="+markers)
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.promote('dev', 'ducklake://main/orders')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := e.sidecar.WaitExit(120 * time.Second); err != nil {
			t.Fatalf("the sidecar did not die at crash point %d: %v", i+1, err)
		}
		e.startSidecar("DATAENV_CRASH_AT=job.materialize.after_write,job.promote.after_write", "DATAENV_CRASH_MARKER_DIR="+markers)
	}
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("promote after the restarts: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text || ' ' || max(row_count) || ' ' || max(promoted_from) FROM dataenv.materializations WHERE request_id = $1`, id); got != "1 1500 dev" {
		t.Fatalf("materialization rows of the promote: %s", got)
	}
	if after := snapshotCount(t, e.catalogState("public")); after != before+1 {
		t.Fatalf("parent snapshots %d -> %d, want one", before, after)
	}
	if got := e.forkState("dev", "orders"); got != "deferred prod" {
		t.Fatalf("fork_materialization after the promote: %s", got)
	}
	if got := e.count("dev", "orders"); got != "1500" {
		t.Fatalf("dev reads %s rows", got)
	}
}

// A fork of a fork promotes into its parent, itself a fork that reads the table from the root
// through a defer view: the parent fork gets a table of its own (fork-materialized), the root is
// untouched, and the child defers to the parent fork.
func TestPromoteIntoAForkParent(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	e.workspace("dev/x", "dev")
	e.materialize("dev/x", "ducklake://main/orders", "SELECT 77 AS id, 7 AS amount", "replace")
	rootCatalog := e.catalogState("public")
	if row := e.promote("dev/x", "ducklake://main/orders", false); row.Status != "succeeded" {
		t.Fatalf("promote into a fork: %s %s", row.Status, deref(row.Error))
	}
	if got := e.run("dev", attachMain+"SELECT count(*), max(id) FROM dl.orders").rowsText(); got != "1,77" {
		t.Fatalf("dev reads %s, want the promoted row", got)
	}
	if got := e.forkState("dev", "orders"); got != "fork-materialized" {
		t.Fatalf("dev: %s", got)
	}
	if got := e.forkState("dev/x", "orders"); got != "deferred dev" {
		t.Fatalf("dev/x: %s", got)
	}
	if got := e.count("dev/x", "orders"); got != "1" {
		t.Fatalf("dev/x reads %s rows", got)
	}
	if got := e.catalogState("public"); got != rootCatalog {
		t.Fatalf("the root's catalog changed: %s -> %s", rootCatalog, got)
	}
	if got := e.count("prod", "orders"); got != "2000" {
		t.Fatalf("prod reads %s rows", got)
	}
}

// A promote whose job fails (the fork's table was dropped behind dataenv's back) fails with
// nothing recorded for the parent: its table, and its forks' defers to it, stay as they were,
// and its role is not left reading the fork's namespace.
func TestFailedPromoteRecordsNothing(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/orders", "SELECT 1 AS id, 1 AS amount", "replace")
	e.run("dev", attachMain+"DROP TABLE dl.orders")
	row := e.promote("dev", "ducklake://main/orders", false)
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "orders") {
		t.Fatalf("promote of a table gone from the fork: %s %s", row.Status, deref(row.Error))
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text || ' ' || max(status) FROM dataenv.materializations WHERE workspace = 'prod'`); got != "1 materialized" {
		t.Fatalf("prod's records after the failed promote: %s", got)
	}
	if got := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.lake_namespace_access
		WHERE workspace = 'prod' AND metadata_schema = $1`, names.ForkLakeSchema("dev", "main")); got != "0" {
		t.Fatalf("prod keeps %s access record(s) to the fork's namespace", got)
	}
	e.workspace("qa", "prod")
	if got := e.count("qa", "orders"); got != "2000" {
		t.Fatalf("a fork of prod reads %s rows of orders", got)
	}
}

// The owner of the parent who may not use the fork (another member made it) is refused: when
// asking, and by the sidecar for a request that reached it otherwise.
func TestPromoteNeedsTheFork(t *testing.T) {
	e := newEnv(t)
	storageKinds[0].setup(t, e)
	boss, alice := e.stranger(), e.stranger()
	bossName, aliceName := queryString(t, boss, `SELECT current_user::text`), queryString(t, alice, `SELECT current_user::text`)
	mustExec(t, boss, `SELECT dataenv.create_workspace('corp')`)
	mustExec(t, e.conn, `SELECT dataenv.add_lake('corp', 'main', 'instance', $1, 'st', 'lakes/corp')`, e.catalog)
	e.startSidecar()
	mustExec(t, boss, `SELECT dataenv.grant_workspace('corp', $1)`, aliceName)
	e.materialize("corp", "ducklake://main/orders", ordersQuery, "replace")
	var id uuid.UUID
	if err := alice.QueryRow(context.Background(), `SELECT dataenv.create_fork('corp', 'corp/a')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("create_fork as alice: %s %s", row.Status, deref(row.Error))
	}
	e.materialize("corp/a", "ducklake://main/orders", "SELECT 1 AS id, 1 AS amount", "replace")
	if got := execErr(t, boss, `SELECT dataenv.promote('corp/a', 'ducklake://main/orders')`); !strings.Contains(got, "may not use workspace") {
		t.Errorf("the parent's owner without the fork: %s", got)
	}
	row := e.wait(e.bypass("promote", map[string]any{"fork": "corp/a", "parent": "corp", "target": "ducklake://main/orders"}, bossName))
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "may not use its fork") {
		t.Fatalf("the sidecar ran a promote for the parent's owner without the fork: %s %s", row.Status, deref(row.Error))
	}
	if got := e.count("corp", "orders"); got != "2000" {
		t.Fatalf("corp reads %s rows", got)
	}
	// Once the fork's owner grants it, the parent's owner promotes.
	mustExec(t, alice, `SELECT dataenv.grant_workspace('corp/a', $1)`, bossName)
	if err := boss.QueryRow(context.Background(), `SELECT dataenv.promote('corp/a', 'ducklake://main/orders')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("promote by the parent's owner: %s %s", row.Status, deref(row.Error))
	}
	if got := e.count("corp", "orders"); got != "1" {
		t.Fatalf("corp reads %s rows after the promote", got)
	}
}
