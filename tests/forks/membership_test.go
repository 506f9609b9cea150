package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestMemberOfBCannotTouchA: a member of workspace B cannot see A, fork it, fork onto or import
// A's copies, or drop A's fork, whether through the SQL functions or a raw request that reaches
// the sidecar after the membership is revoked; a member who is not the owner cannot drop it.
func TestMemberOfBCannotTouchA(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob := f.newUser(), f.newUser()
	p := f.parentDB("p", 3)
	wsA, wsB, forkA := wsID("a"), wsID("b"), wsID("fa")
	mustExec(t, alice.conn, `SELECT dataenv.create_workspace($1)`, wsA)
	f.grantDatabase(alice, f.name, p)
	mustExec(t, alice.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, wsA, f.name, p)
	mustExec(t, bob.conn, `SELECT dataenv.create_workspace($1)`, wsB)
	f.mustSucceed(f.request(alice.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, wsA, forkA))
	copyA := names.ForkDatabase(forkA, "d")

	// Row-level security: bob sees only B.
	for _, tbl := range []string{"workspaces", "datatables", "fork_copies", "workspace_members", "datatable_resolution", "fork_copy_list", "workspace_chain"} {
		col := "workspace"
		if tbl == "workspaces" {
			col = "id"
		}
		if n := queryInt(t, bob.conn, `SELECT count(*) FROM dataenv.`+tbl+` WHERE `+col+` IN ($1, $2)`, wsA, forkA); n != 0 {
			t.Errorf("bob sees %d rows of A in dataenv.%s", n, tbl)
		}
	}
	refused := []struct{ sql, want string }{
		{`SELECT dataenv.create_fork('` + wsA + `', 'bob-fork')`, "may use"},
		{`SELECT dataenv.drop_fork('` + forkA + `')`, "may use"},
		{`SELECT dataenv.resolve_datatable('` + forkA + `', 'd')`, "may use"},
		{`SELECT dataenv.add_datatable('` + wsA + `', 'x', '` + f.name + `', '` + p + `')`, "may use"},
		{`SELECT dataenv.grant_workspace('` + wsA + `', current_user)`, "may use"},
		// importing A's copy into B: refused (dataenv_ names are reserved; the registry guard
		// below refuses it even for a row written directly)
		{`SELECT dataenv.add_datatable('` + wsB + `', 'x', '` + f.name + `', '` + copyA + `')`, "reserved prefix"},
		{`INSERT INTO dataenv.datatables (workspace, name, cluster, database) VALUES ('` + wsB + `', 'x', '` + f.name + `', '` + copyA + `')`, "fork copy made for workspace"},
		// forking onto A's copy: the fork id is A's fork
		{`SELECT dataenv.create_fork('` + wsB + `', '` + forkA + `')`, "already exists"},
		{`INSERT INTO dataenv.workspaces (id, is_fork) VALUES ('sneaky', true)`, "permission denied"},
		{`UPDATE dataenv.workspaces SET is_fork = false WHERE id = '` + wsB + `'`, "permission denied"},
		{`DELETE FROM dataenv.fork_copies`, "permission denied"},
	}
	for _, c := range refused {
		if err := sqlErr(bob.conn, c.sql); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bob: %s: %v, want an error with %q", c.sql, err, c.want)
		}
	}
	if tag, err := bob.conn.Exec(f.ctx, `DELETE FROM dataenv.workspaces WHERE id IN ($1, $2)`, wsA, forkA); err != nil || tag.RowsAffected() != 0 {
		t.Errorf("bob deleting A: %v, %v", tag, err)
	}

	// The sidecar checks again, for the role that made the request: bob is a member of A when
	// he asks, and no longer when the request runs.
	mustExec(t, alice.conn, `SELECT dataenv.grant_workspace($1, $2)`, wsA, bob.name)
	mustExec(t, alice.conn, `SELECT dataenv.grant_workspace($1, $2)`, forkA, bob.name)
	f.sidecar.Kill()
	forkID := f.request(bob.conn, `SELECT dataenv.create_fork($1, 'bob-fork-of-a', '{"d": "schema_only"}')`, wsA)
	// Dropping needs the owner: a member is refused when he asks.
	if err := sqlErr(bob.conn, `SELECT dataenv.drop_fork($1)`, forkA); err == nil || !strings.Contains(err.Error(), "is not the owner") {
		t.Errorf("bob, a member of A's fork, asked to drop it: %v, want a refusal naming the owner rule", err)
	}
	mustExec(t, alice.conn, `SELECT dataenv.revoke_workspace($1, $2)`, wsA, bob.name)
	mustExec(t, alice.conn, `SELECT dataenv.revoke_workspace($1, $2)`, forkA, bob.name)
	f.sidecar = f.startSidecar()
	f.mustFail(forkID, "is not a member of workspace")
	if !databaseExists(t, copyA) || databaseExists(t, names.ForkDatabase("bob-fork-of-a", "d")) {
		t.Fatal("a refused request changed databases")
	}
	// Alice still can.
	f.mustSucceed(f.request(alice.conn, `SELECT dataenv.drop_fork($1)`, forkA))
	if databaseExists(t, copyA) {
		t.Fatal("alice's drop_fork left the copy")
	}
}
