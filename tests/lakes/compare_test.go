package lakes_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// compareFork makes a compare_fork request of fork and returns its lakes and the rows
// dataenv.fork_differences shows for them ("lake kind object change: detail").
func (e *env) compareFork(fork string) (lakes []compareLake, rows []string) {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.compare_fork($1)`, fork).Scan(&id); err != nil {
		e.t.Fatalf("compare_fork: %v", err)
	}
	row := e.wait(id)
	if row.Status != "succeeded" {
		e.t.Fatalf("compare_fork %s: %s %s", fork, row.Status, deref(row.Error))
	}
	var res struct {
		Lakes []compareLake `json:"lakes"`
	}
	if err := json.Unmarshal(row.Result, &res); err != nil {
		e.t.Fatalf("compare_fork result %s: %v", row.Result, err)
	}
	r, err := e.conn.Query(context.Background(), `SELECT name || ' ' || coalesce(object_kind, '-') || ' ' || coalesce(object, '-') || ' ' || change
		|| ': ' || coalesce(detail, '') FROM dataenv.fork_differences($1) WHERE area = 'lake'`, id)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			e.t.Fatal(err)
		}
		rows = append(rows, s)
	}
	if r.Err() != nil {
		e.t.Fatal(r.Err())
	}
	return res.Lakes, rows
}

type compareLake struct {
	Lake   string `json:"lake"`
	Status string `json:"status"`
	Tables []struct {
		Table          string  `json:"table"`
		State          string  `json:"state"`
		RowCount       *int64  `json:"row_count"`
		ParentState    string  `json:"parent_state"`
		ParentFrom     string  `json:"parent_from"`
		ParentRowCount *int64  `json:"parent_row_count"`
		ParentAt       *string `json:"parent_materialized_at"`
		ParentNewer    bool    `json:"parent_newer"`
	} `json:"tables"`
}

func count(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}

// compare_fork lists the lake tables a fork materialized, with their row counts, beside the
// parent's state: materialized (with its row count, and whether it is newer than the fork's),
// or deferred to an ancestor; tables the fork still defers are not listed.
func TestCompareForkListsTheForksLakeTables(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	e.materialize("prod", "ducklake://main/customers", attachMain+"SELECT range AS id FROM range(7)", "replace")
	e.workspace("dev", "prod")
	lakes, rows := e.compareFork("dev")
	if len(lakes) != 1 || lakes[0].Lake != "main" || len(lakes[0].Tables) != 0 || len(rows) != 1 ||
		!strings.HasPrefix(rows[0], "main - - isolated: the fork materialized no table of its own") {
		t.Fatalf("compare_fork of a fresh fork: %+v\n%s", lakes, strings.Join(rows, "\n"))
	}

	e.materialize("dev", "ducklake://main/orders", attachMain+"SELECT * FROM dl.orders WHERE id < 5", "replace")
	e.materialize("prod", "ducklake://main/orders", attachMain+"SELECT range AS id, range AS amount FROM range(2001)", "replace")
	lakes, rows = e.compareFork("dev")
	if len(lakes) != 1 || len(lakes[0].Tables) != 1 || len(rows) != 1 {
		t.Fatalf("compare_fork of dev: %+v\n%s", lakes, strings.Join(rows, "\n"))
	}
	tb := lakes[0].Tables[0]
	if tb.Table != "orders" || tb.State != "fork-materialized" || count(tb.RowCount) != 5 || tb.ParentState != "materialized" ||
		count(tb.ParentRowCount) != 2001 || tb.ParentAt == nil || !tb.ParentNewer {
		t.Fatalf("dev's orders: %+v", tb)
	}
	if !strings.HasPrefix(rows[0], "main table orders fork-materialized: fork: 5 rows at ") ||
		!strings.Contains(rows[0], "; parent: materialized, 2001 rows at ") || !strings.HasSuffix(rows[0], "(newer than the fork's)") {
		t.Fatalf("fork_differences row: %s", rows[0])
	}

	// A fork of dev that materializes customers: dev reads customers from prod.
	e.workspace("dev/sub", "dev")
	e.materialize("dev/sub", "ducklake://main/customers", attachMain+"SELECT 1 AS id", "replace")
	lakes, _ = e.compareFork("dev/sub")
	if len(lakes) != 1 || len(lakes[0].Tables) != 1 {
		t.Fatalf("compare_fork of dev/sub: %+v", lakes)
	}
	tb = lakes[0].Tables[0]
	if tb.Table != "customers" || count(tb.RowCount) != 1 || tb.ParentState != "deferred" || tb.ParentFrom != "prod" ||
		count(tb.ParentRowCount) != 7 || tb.ParentNewer {
		t.Fatalf("dev/sub's customers: %+v", tb)
	}

	// A shared lake writes the parent's namespace: nothing to compare.
	e.workspace("backfill", "prod", "main")
	if lakes, rows = e.compareFork("backfill"); len(lakes) != 1 || lakes[0].Status != "shared" || len(rows) != 1 {
		t.Fatalf("compare_fork of a fork sharing its lake: %+v %v", lakes, rows)
	}
}
