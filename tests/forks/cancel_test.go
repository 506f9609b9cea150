package forks_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestCancelDuringCopyLeavesNothing: dataenv.cancel while a schema_only copy is loading stops the
// tools; the request ends cancelled, the copy database and its registry row are gone, and no
// fork workspace exists.
func TestCancelDuringCopyLeavesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.prefix + "big"
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_database($1, $2)`, f.name, p))
	conn := external.Connect(t, p)
	mustExec(t, conn, `SET ROLE `+ident(f.appRole))
	var ddl strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&ddl, "CREATE TABLE t%d (id int PRIMARY KEY, v text UNIQUE, w int CHECK (w > 0));\n", i)
	}
	mustExec(t, conn, ddl.String())
	_ = conn.Close(f.ctx)

	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)
	deadline := time.Now().Add(60 * time.Second)
	for queryInt(t, a.conn, `SELECT count(*) FROM dataenv.requests, jsonb_array_elements(steps) s WHERE id = $1::uuid AND s->>'status' = 'loading'`, id) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the copy never started loading")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustExec(t, a.conn, `SELECT dataenv.cancel($1::uuid)`, id)
	r := f.wait(id)
	if r.status != "cancelled" { // loading 1000 tables takes seconds; the cancel comes within milliseconds
		t.Fatalf("request %s: %s %s, want cancelled", id, r.status, r.err)
	}
	copyDB := names.ForkDatabase(fork, "d")
	if databaseExists(t, copyDB) {
		t.Fatal("a cancelled create_fork left its copy database")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, fork); n != 0 {
		t.Fatal("a cancelled create_fork left registry rows")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspaces WHERE id = $1`, fork); n != 0 {
		t.Fatal("a cancelled create_fork left a workspace")
	}
}
