package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestConcurrentCreatesOfOneForkID: two create_fork requests for one fork id, both valid when
// made, run at the same time: one makes the fork, the other is refused, and there is exactly one
// copy (neither treats the other's copies as leftovers to drop).
func TestConcurrentCreatesOfOneForkID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("p", 20)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	f.sidecar.Kill()
	ids := []string{
		f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork),
		f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork),
	}
	f.sidecar = f.startSidecar()
	succeeded, refused := 0, 0
	for _, id := range ids {
		switch r := f.wait(id); {
		case r.status == "succeeded":
			succeeded++
		case r.status == "failed" && strings.Contains(r.err, "already exists"):
			refused++
		default:
			t.Fatalf("request %s: %s %s", id, r.status, r.err)
		}
	}
	if succeeded != 1 || refused != 1 {
		t.Fatalf("%d succeeded, %d refused; want one each", succeeded, refused)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND state = 'ready'`, fork); n != 1 {
		t.Fatalf("%d registry rows", n)
	}
	if !databaseExists(t, names.ForkDatabase(fork, "d")) {
		t.Fatal("the fork's copy is missing")
	}
}
