package lifecycle_test

import (
	"time"

	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/tests/testenv"
)

// protectedSays is what every refusal of a protected workspace says: that it is protected, and
// how to unprotect it.
var protectedSays = []string{"is protected", "dataenv.unprotect_workspace("}

// TestProtectedRootRefusesRemovals: a protected root workspace cannot be dropped or have its
// datatables and lakes removed (through the API or a plain DELETE); only its owner or an
// administrator protects and unprotects; once unprotected, the removals work.
func TestProtectedRootRefusesRemovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, e.member.name)
	db := pg.CreateDatabase(t)
	mustExec(t, e.sql, `SELECT dataenv.add_datatable($1, 'crm', 'instance', $2)`, ws, db)
	mustExec(t, e.sql, `SELECT dataenv.add_datatable($1, 'other', 'instance', $2)`, ws, db)
	mustExec(t, e.sql, `SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	mustExec(t, e.sql, `SELECT dataenv.add_lake($1, 'main', 'instance', $2, 'st', 'lakes/main', validate => false)`, ws, pg.CreateDatabase(t))

	mustRefuse(t, e.member.conn, []string{"is not the owner"}, `SELECT dataenv.protect_workspace($1)`, ws)
	stranger := e.newUser()
	mustRefuse(t, stranger.conn, []string{"no workspace"}, `SELECT dataenv.protect_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.protect_workspace($1)`, ws)
	mustRefuse(t, stranger.conn, []string{"no workspace"}, `SELECT dataenv.unprotect_workspace($1)`, ws)
	if n := testenv.Query[int](t, stranger.conn, `SELECT count(*) FROM dataenv.workspace_lifecycle`); n != 0 {
		t.Fatal("a stranger sees the workspace's lifecycle")
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.protect_workspace($1)`, ws) // idempotent
	var protected bool
	var by string
	if err := e.member.conn.QueryRow(e.ctx, `SELECT protected, protected_by FROM dataenv.workspace_lifecycle WHERE workspace = $1`, ws).Scan(&protected, &by); err != nil {
		t.Fatal(err)
	}
	if !protected || by != e.owner.name {
		t.Fatalf("workspace_lifecycle: protected %v by %s", protected, by)
	}

	mustRefuse(t, e.owner.conn, append([]string{"dataenv.drop_workspace", "cannot be dropped"}, protectedSays...), `SELECT dataenv.drop_workspace($1)`, ws)
	mustRefuse(t, e.sql, protectedSays, `SELECT dataenv.drop_workspace($1)`, ws) // administrators too
	mustRefuse(t, e.owner.conn, protectedSays, `DELETE FROM dataenv.workspaces WHERE id = $1`, ws)
	mustRefuse(t, e.member.conn, append([]string{"dataenv.remove_datatable", `datatable "crm"`}, protectedSays...),
		`SELECT dataenv.remove_datatable($1, 'crm')`, ws)
	mustRefuse(t, e.member.conn, protectedSays, `DELETE FROM dataenv.datatables WHERE workspace = $1`, ws)
	mustRefuse(t, e.sql, append([]string{"dataenv.remove_lake", `lake "main"`}, protectedSays...), `SELECT dataenv.remove_lake($1, 'main')`, ws)
	mustRefuse(t, e.sql, protectedSays, `DELETE FROM dataenv.lakes WHERE workspace = $1`, ws)
	if n := testenv.Query[int](t, e.sql, `SELECT (SELECT count(*) FROM dataenv.datatables WHERE workspace = $1) + (SELECT count(*) FROM dataenv.lakes WHERE workspace = $1)`, ws); n != 3 {
		t.Fatalf("%d datatables and lakes left, want 3", n)
	}

	mustRefuse(t, e.member.conn, []string{"is not the owner"}, `SELECT dataenv.unprotect_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.remove_datatable($1, 'crm')`, ws)
	mustExec(t, e.sql, `SELECT dataenv.remove_lake($1, 'main')`, ws)
	// An administrator protects a workspace it does not own.
	mustExec(t, e.sql, `SELECT dataenv.protect_workspace($1)`, ws)
	mustRefuse(t, e.owner.conn, protectedSays, `SELECT dataenv.drop_workspace($1)`, ws)
	mustExec(t, e.sql, `SELECT dataenv.unprotect_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.drop_workspace($1)`, ws)
}

// TestProtectedForkRefusesDrop: drop_fork of a protected fork is refused when it is asked for;
// a drop already filed when the fork was protected, and a cascade reaching a protected child, are
// refused by the sidecar with nothing dropped; unprotected, the drop works.
func TestProtectedForkRefusesDrop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	fork, child := ws+"/f", ws+"/f/c"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	e.fork(e.owner, ws, fork, "")
	e.fork(e.owner, fork, child, "")

	mustExec(t, e.owner.conn, `SELECT dataenv.protect_workspace($1)`, child)
	mustRefuse(t, e.owner.conn, append([]string{"drop_fork", "cannot be dropped"}, protectedSays...), `SELECT dataenv.drop_fork($1)`, child)
	mustRefuse(t, e.owner.conn, []string{"protected workspaces (" + child + ")", "dataenv.unprotect_workspace("},
		`SELECT dataenv.drop_fork($1, cascade => true)`, fork)

	// Filed first, protected after, in one transaction: the sidecar sees a queued drop of a
	// protected fork.
	queued := func(sql string, ws string) uuid.UUID {
		t.Helper()
		tx, err := e.owner.conn.Begin(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var id uuid.UUID
		if err := tx.QueryRow(e.ctx, sql, fork).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(e.ctx, `SELECT dataenv.protect_workspace($1)`, ws); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(e.ctx); err != nil {
			t.Fatal(err)
		}
		return id
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, child)
	e.mustFail(queued(`SELECT dataenv.drop_fork($1, cascade => true)`, child), "protected workspaces ("+child+")", "nothing was dropped", "unprotect_workspace")
	if !e.exists(fork) || !e.exists(child) {
		t.Fatal("a cascade reaching a protected child dropped something")
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, child)
	mustExec(t, e.owner.conn, `SELECT dataenv.drop_fork($1)`, child) // a leaf; the cascade test is done
	testenv.Eventually(t, 2*time.Minute, "the child's drop", func() bool { return !e.exists(child) })
	mustExec(t, e.owner.conn, `SELECT dataenv.protect_workspace($1)`, fork)
	// reset_fork: refused at the call, and by the sidecar for a reset filed before the protection.
	mustRefuse(t, e.owner.conn, append([]string{"reset_fork", "cannot be reset"}, protectedSays...), `SELECT dataenv.reset_fork($1)`, fork)
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, fork)
	e.mustFail(queued(`SELECT dataenv.reset_fork($1)`, fork), "is protected", "cannot be reset", "nothing was changed", "unprotect_workspace")
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, fork)
	e.mustFail(queued(`SELECT dataenv.drop_fork($1)`, fork), "is protected", "nothing was dropped", "unprotect_workspace")
	if !e.exists(fork) {
		t.Fatal("a queued drop of a protected fork dropped it")
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, fork)
	e.mustSucceed(e.request(e.owner.conn, `SELECT dataenv.drop_fork($1)`, fork))
}

// TestProtectedForkDoesNotExpire: an expired protected fork is kept (and shown so); a sibling
// that expired later shows that sweeps ran. Unprotected, it expires at the next sweep.
func TestProtectedForkDoesNotExpire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	kept, sibling := ws+"/kept", ws+"/s"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	e.fork(e.owner, ws, kept, "expires_in => '1 hour'")
	e.fork(e.owner, ws, sibling, "expires_in => '1 hour'")
	mustExec(t, e.owner.conn, `SELECT dataenv.protect_workspace($1)`, kept)
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now())`, kept)
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now())`, sibling)
	e.waitGone(sibling)
	if !e.exists(kept) || len(e.expiryRequests(kept)) != 0 {
		t.Fatal("a protected fork expired")
	}
	if st := testenv.QueryText(t, e.owner.conn, `SELECT expiry_state FROM dataenv.workspace_lifecycle WHERE workspace = $1`, kept); st != "protected" {
		t.Fatalf("expiry_state: %q", st)
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.unprotect_workspace($1)`, kept)
	e.waitGone(kept)
}
