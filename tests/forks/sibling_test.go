package forks_test

import (
	"fmt"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// shdependOf counts what role owns or holds in database db (pg_shdepend).
func (f *fixture) shdependOf(db, role string) int {
	f.t.Helper()
	conn := f.pg.Connect(f.t, db)
	defer conn.Close(f.ctx)
	return queryInt(f.t, conn, `SELECT count(*)::int FROM pg_catalog.pg_shdepend s JOIN pg_catalog.pg_roles r ON r.oid = s.refobjid
		WHERE s.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()) AND r.rolname = $1`, role)
}

// TestSiblingForksShareNothing: a full_copy or schema_only fork made while a keep_original
// sibling is being created (which grants the sibling's workspace role what the parent's datatable
// grants, in the parent's database) carries none of those grants into its copy: the sibling's
// members would reach the copy, and the sibling's role could not be dropped.
func TestSiblingForksShareNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("p", 20)
	ws := wsID("ws")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	for i := range 4 {
		mode := []string{"full_copy", "schema_only"}[i%2]
		keep, copied := fmt.Sprintf("%s-k%d", ws, i), fmt.Sprintf("%s-c%d", ws, i)
		ids := []string{
			f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "keep_original"}')`, ws, keep),
			f.request(a.conn, `SELECT dataenv.create_fork($1, $2, jsonb_build_object('d', $3::text))`, ws, copied, mode),
		}
		for _, id := range ids {
			f.mustSucceed(id)
		}
		role, db := f.forkRole(keep), names.ForkDatabase(copied, "d")
		if f.shdependOf(p, role) == 0 {
			t.Fatalf("round %d: the keep_original fork's role %s was given nothing in the parent", i, role)
		}
		if n := f.shdependOf(db, role); n != 0 {
			t.Errorf("round %d: the %s copy %s holds %d privileges or objects of the keep_original sibling's role %s", i, mode, db, n, role)
		}
		f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, keep))
		f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, copied))
	}
}

// TestDropForkTakesBackStrayGrants: privileges a fork's role holds in a copy dataenv made for
// another workspace (never given by dataenv; here granted by hand) do not keep the fork's role
// from being dropped: the drop takes them back there, and leaves the other copy otherwise as it was.
func TestDropForkTakesBackStrayGrants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("p", 5)
	ws := wsID("ws")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	keep, copied := ws+"-k", ws+"-c"
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "keep_original"}')`, ws, keep))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, copied))
	role, db := f.forkRole(keep), names.ForkDatabase(copied, "d")
	conn := f.pg.Connect(t, db)
	mustExec(t, conn, `GRANT SELECT ON customers, orders TO `+ident(role))
	_ = conn.Close(f.ctx)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, keep))
	if queryInt(t, f.pg.Connect(t, "postgres"), `SELECT count(*)::int FROM pg_roles WHERE rolname = $1`, role) != 0 {
		t.Fatalf("role %s is still there", role)
	}
	if n := countRows(t, db, "customers"); n != 5 {
		t.Fatalf("the other fork's copy has %d customers, want 5", n)
	}
}
