package lakes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// request runs sql (which returns a request id) on the test's connection and waits for it to
// succeed; it returns the result.
func (e *env) requestOK(sql string, args ...any) map[string]any {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	row := e.wait(id)
	if row.Status != "succeeded" {
		e.t.Fatalf("%s: %s %s", sql, row.Status, deref(row.Error))
	}
	var out map[string]any
	_ = json.Unmarshal(row.Result, &out)
	return out
}

// snapshots counts the snapshots of the root lake's catalog (schema public).
func (e *env) snapshots() int {
	e.t.Helper()
	var n int
	if err := pg.Connect(e.t, e.catalog).QueryRow(context.Background(), `SELECT count(*) FROM public.ducklake_snapshot`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) pinnedSnapshot(fork, table string) *int64 {
	e.t.Helper()
	var s *int64
	if err := e.conn.QueryRow(context.Background(), `SELECT pinned_snapshot FROM dataenv.fork_materialization
		WHERE workspace = $1 AND lake = 'main' AND table_name = $2`, fork, table).Scan(&s); err != nil {
		e.t.Fatalf("fork_materialization of %s/%s: %v", fork, table, err)
	}
	return s
}

// A fork made with pin_lakes reads the parent's lake as it was when the fork was made, in its
// jobs, its members' DuckDB script and its sub-forks, while the parent rewrites the table and
// maintains the lake (maintain_lake expires every snapshot but the current and the pinned one,
// and the pinned one's files stay); an unpinned fork reads the parent's new rows. repin_fork
// moves the pin to now, and the next maintenance expires the old pin's snapshot. On a local data
// path and on the S3 server.
func TestPinnedForkReadsItsSnapshot(t *testing.T) {
	for _, sk := range storageKinds {
		t.Run(sk.name, func(t *testing.T) { pinnedForkScenario(t, sk) })
	}
}

func pinnedForkScenario(t *testing.T, sk storageKind) {
	e, _ := lakeEnv(t, sk)
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.requestOK(`SELECT dataenv.create_fork('prod', 'pinned', pin_lakes => true)`)
	e.requestOK(`SELECT dataenv.create_fork('pinned', 'pinned/sub')`) // unpinned: inherits its parent's pin of prod
	e.workspace("live", "prod")

	var pin int64
	if err := e.conn.QueryRow(context.Background(), `SELECT snapshot_id FROM dataenv.fork_lake_pins
		WHERE fork = 'pinned' AND lake = 'main' AND ancestor = 'prod'`).Scan(&pin); err != nil {
		t.Fatalf("the pin of the fork: %v", err)
	}
	if got := e.pinnedSnapshot("pinned", "orders"); got == nil || *got != pin {
		t.Fatalf("fork_materialization shows pinned_snapshot %v, the pin is %d", got, pin)
	}
	if got := e.pinnedSnapshot("pinned/sub", "orders"); got == nil || *got != pin {
		t.Fatalf("fork_materialization of the sub-fork shows pinned_snapshot %v, want %d", got, pin)
	}
	if got := e.pinnedSnapshot("live", "orders"); got != nil {
		t.Fatalf("an unpinned fork shows pinned_snapshot %d", *got)
	}
	mb := e.member("pinned")
	if got := queryString(t, mb.conn, `SELECT pinned_snapshot::text FROM dataenv.fork_materialization
		WHERE workspace = 'pinned' AND table_name = 'orders'`); got != fmt.Sprint(pin) {
		t.Fatalf("a member of the fork reads pinned_snapshot %q, want %d", got, pin)
	}

	// The parent rewrites the table, adds one, and is maintained.
	e.materialize("prod", "ducklake://main/orders", attachMain+"SELECT range AS id, 1 AS amount FROM range(1500)", "replace")
	e.materialize("prod", "ducklake://main/late", "SELECT 42 AS answer", "replace")
	e.materialize("prod", "ducklake://main/orders", attachMain+"SELECT range AS id, 2 AS amount FROM range(3)", "replace")
	before := e.snapshots()
	m := e.requestOK(`SELECT dataenv.maintain_lake('prod', 'main')`)
	after := e.snapshots()
	if before < 5 || after != 2 || len(m["expire"].([]any)) != before-2 || !strings.Contains(jsonText(m["pinned"]), jsonText(pin)) {
		t.Fatalf("maintain_lake: %d snapshots before, %d after; result %v", before, after, m)
	}
	if m["files_deleted"].(float64) < 1 {
		t.Fatalf("maintain_lake deleted no file: %v", m)
	}

	for _, ws := range []string{"pinned", "pinned/sub"} {
		if got := e.run(ws, attachMain+"SELECT count(*), max(amount) FROM dl.orders").rowsText(); got != "2000,19990" {
			t.Fatalf("%s reads %s after the parent's rewrite and maintenance, want its pinned 2000 rows", ws, got)
		}
	}
	if got := e.run("live", attachMain+"SELECT count(*), max(amount) FROM dl.orders").rowsText(); got != "3,2" {
		t.Fatalf("the unpinned fork reads %s", got)
	}
	if row := e.runRow("pinned", attachMain+"SELECT * FROM dl.late"); row.Status != "failed" {
		t.Fatalf("the pinned fork reads a table made after its pin: %s", row.Status)
	}
	// Its members' own DuckDB sessions read the same snapshot.
	script := queryString(t, e.conn, `SELECT dataenv.duckdb_script('pinned')`)
	if got := runPythonDuckDB(t, script, `SELECT count(*) FROM main_lake.orders`); got[0] != "2000" {
		t.Fatalf("the pinned fork's DuckDB script reads %q", got[0])
	}

	// Repinned: the fork and its sub-fork read the parent's current rows and tables.
	r := e.requestOK(`SELECT dataenv.repin_fork('pinned')`)
	var now int64
	if err := pg.Connect(t, e.catalog).QueryRow(context.Background(), `SELECT max(snapshot_id) FROM public.ducklake_snapshot`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if got := e.pinnedSnapshot("pinned", "orders"); got == nil || *got != now {
		t.Fatalf("after repin_fork pinned_snapshot is %v, want %d (result %v)", got, now, r)
	}
	for _, ws := range []string{"pinned", "pinned/sub"} {
		if got := e.run(ws, attachMain+"SELECT count(*), max(amount) FROM dl.orders").rowsText(); got != "3,2" {
			t.Fatalf("%s reads %s after repin_fork", ws, got)
		}
		if got := e.run(ws, attachMain+"SELECT answer FROM dl.late").rowsText(); got != "42" {
			t.Fatalf("%s reads late: %s", ws, got)
		}
	}
	script = queryString(t, e.conn, `SELECT dataenv.duckdb_script('pinned')`)
	if got := runPythonDuckDB(t, script, `SELECT count(*) FROM main_lake.orders`); got[0] != "3" {
		t.Fatalf("the repinned fork's DuckDB script reads %q", got[0])
	}
	e.requestOK(`SELECT dataenv.maintain_lake('prod', 'main')`)
	if got := e.snapshots(); got != 1 {
		t.Fatalf("after the repin, maintenance kept %d snapshots, want the current one", got)
	}

	// Dropped forks hold nothing back.
	for _, f := range []string{"pinned/sub", "pinned", "live"} {
		if row := e.dropFork(f); row.Status != "succeeded" {
			t.Fatalf("drop_fork %s: %s %s", f, row.Status, deref(row.Error))
		}
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.fork_lake_pins`); n != "0" {
		t.Fatalf("%s pins left after the forks were dropped", n)
	}
}

// repin_fork and maintain_lake refuse what they cannot do, saying why.
func TestPinRefusals(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	if msg := execErr(t, e.conn, `SELECT dataenv.repin_fork('prod')`); !strings.Contains(msg, "is not a fork") {
		t.Fatalf("repin_fork of a root: %s", msg)
	}
	if msg := execErr(t, e.conn, `SELECT dataenv.maintain_lake('prod', 'nope')`); !strings.Contains(msg, `has no lake named "nope"`) {
		t.Fatalf("maintain_lake of a missing lake: %s", msg)
	}
	if msg := execErr(t, e.conn, `INSERT INTO dataenv.requests (kind, args) VALUES ('create_fork', '{"parent": "prod", "fork": "x", "pin_lakes": "yes"}')`); !strings.Contains(msg, "pin_lakes must be true or false") {
		t.Fatalf("a non-boolean pin_lakes: %s", msg)
	}
	e.workspace("dev", "prod", "main")
	if msg := execErr(t, e.conn, `SELECT dataenv.maintain_lake('dev', 'main')`); !strings.Contains(msg, "is shared with its parent") {
		t.Fatalf("maintain_lake of a shared lake: %s", msg)
	}
	// A lake never written has nothing to maintain.
	if m := e.requestOK(`SELECT dataenv.maintain_lake('prod', 'main')`); m["bootstrapped"] != false && len(m["expire"].([]any)) != 0 {
		t.Fatalf("maintain_lake of a new lake: %v", m)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A fork made with pin_lakes below a pinned fork sees the lakes as its parent sees them: it
// takes its parent's pin of the grandparent, and pins its parent's own namespace at its current
// snapshot; repinning it moves the latter, and keeps the former at the parent's pin.
func TestPinnedSubForkSeesWhatItsParentSees(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.requestOK(`SELECT dataenv.create_fork('prod', 'a', pin_lakes => true)`)
	e.materialize("prod", "ducklake://main/orders", attachMain+"SELECT range AS id, 1 AS amount FROM range(3)", "replace")
	e.materialize("a", "ducklake://main/mine", "SELECT 1 AS x", "replace")
	res := e.requestOK(`SELECT dataenv.create_fork('a', 'a/b', pin_lakes => true)`)
	pins := queryString(t, e.conn, `SELECT string_agg(ancestor || '=' || (snapshot_id = (SELECT snapshot_id FROM dataenv.fork_lake_pins
		WHERE fork = 'a' AND ancestor = 'prod'))::text, ',' ORDER BY ancestor) FROM dataenv.fork_lake_pins WHERE fork = 'a/b'`)
	if pins != "a=false,prod=true" {
		t.Fatalf("the pins of a/b (ancestor=same snapshot as a's pin of prod): %s; create_fork result %v", pins, res["pins"])
	}
	e.materialize("a", "ducklake://main/mine", "SELECT 2 AS x UNION ALL SELECT 3", "replace")
	read := func() string {
		return e.run("a/b", attachMain+"SELECT (SELECT count(*) FROM dl.orders) || '/' || (SELECT count(*) FROM dl.mine)").rowsText()
	}
	if got := read(); got != "2000/1" {
		t.Fatalf("a/b reads orders/mine %s, want its parent's view of prod and a's table at its pin", got)
	}
	e.requestOK(`SELECT dataenv.repin_fork('a/b')`)
	if got := read(); got != "2000/2" {
		t.Fatalf("after repin_fork, a/b reads orders/mine %s, want prod at a's pin and a's current table", got)
	}
}

// A pinned snapshot expired outside dataenv.maintain_lake (a DuckLake call of the parent's own)
// fails the fork's jobs with what to do, and repin_fork is the way back.
func TestPinExpiredOutsideMaintainLake(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.requestOK(`SELECT dataenv.create_fork('prod', 'dev', pin_lakes => true)`)
	e.materialize("prod", "ducklake://main/orders", attachMain+"SELECT range AS id, 1 AS amount FROM range(3)", "replace")
	pin := queryString(t, e.conn, `SELECT snapshot_id::text FROM dataenv.fork_lake_pins WHERE fork = 'dev'`)
	e.run("prod", attachMain+"CALL ducklake_expire_snapshots('dl', versions => ["+pin+"])")
	row := e.runRow("dev", attachMain+"SELECT count(*) FROM dl.orders")
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "no longer exists") || !strings.Contains(deref(row.Error), "dataenv.repin_fork('dev')") {
		t.Fatalf("a job at an expired pin: %s %s", row.Status, deref(row.Error))
	}
	e.requestOK(`SELECT dataenv.repin_fork('dev')`)
	if got := e.count("dev", "orders"); got != "3" {
		t.Fatalf("after repin_fork dev reads %s rows", got)
	}
}
