package security_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestOnlyTheOwnerAdministersAWorkspace: a member uses a workspace but cannot drop it, grant or
// revoke its members, whether through the functions or the tables; the owner and an administrator
// can. The owner is always a member.
func TestOnlyTheOwnerAdministersAWorkspace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("w")
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, e.member.name)
	for _, sql := range []string{
		`SELECT dataenv.drop_workspace($1)`,
		`SELECT dataenv.grant_workspace($1, $2)`,
		`SELECT dataenv.revoke_workspace($1, $3)`,
	} {
		wantErr(t, "member", e.member.conn, "is not the owner", sql+` WHERE $2::name IS NOT NULL AND $3::name IS NOT NULL`, ws, e.stranger.name, e.member.name)
	}
	if tag, err := e.member.conn.Exec(e.ctx, `DELETE FROM dataenv.workspaces WHERE id = $1`, ws); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("member deletes the workspace row: %v %v", tag, err)
	}
	if tag, err := e.member.conn.Exec(e.ctx, `DELETE FROM dataenv.workspace_members WHERE workspace = $1`, ws); err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("member deletes members: %v %v", tag, err)
	}
	wantErr(t, "member", e.member.conn, "row-level security", `INSERT INTO dataenv.workspace_members (workspace, member) VALUES ($1, $2)`, ws, e.stranger.name)
	if n := queryInt(t, e.sql, `SELECT count(*)::int FROM dataenv.workspace_members WHERE workspace = $1`, ws); n != 2 {
		t.Fatalf("%d members after the member's attempts, want 2", n)
	}
	// The owner may, and stays able to use the workspace without a membership row.
	mustExec(t, e.owner.conn, `SELECT dataenv.revoke_workspace($1, $2)`, ws, e.owner.name)
	if n := queryInt(t, e.owner.conn, `SELECT count(*)::int FROM dataenv.workspaces WHERE id = $1`, ws); n != 1 {
		t.Fatal("the owner lost the workspace by revoking its own membership")
	}
	mustExec(t, e.admin.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, e.stranger.name)
	mustExec(t, e.owner.conn, `SELECT dataenv.drop_workspace($1)`, ws)
}

// TestARecreatedWorkspaceInheritsNothing: dropping a root took nothing of its lake rows before,
// and another user's workspace of the same id read the old lake. Now the lake rows and
// materialization records go with the workspace, and the new workspace starts empty.
func TestARecreatedWorkspaceInheritsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws, catalog := wsID("w"), control.CreateDatabase(t)
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	e.exec(`SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	e.exec(`SELECT dataenv.add_lake($1, 'main', 'instance', $2, 'st', 'lakes/main')`, ws, catalog)
	e.exec(`INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, request_id)
		VALUES ($1, 'main', 't', 'materialized', 'replace', gen_random_uuid())`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.drop_workspace($1)`, ws)
	if n := queryInt(t, e.sql, `SELECT (SELECT count(*) FROM dataenv.lakes WHERE workspace = $1)
		+ (SELECT count(*) FROM dataenv.materializations WHERE workspace = $1)
		+ (SELECT count(*) FROM dataenv.workspace_tombstones WHERE id = $1)`, ws); n != 0 {
		t.Fatalf("%d rows of the dropped workspace are left", n)
	}
	mustExec(t, e.stranger.conn, `SELECT dataenv.create_workspace($1)`, ws)
	for _, view := range []string{"lake_info", "materialization_list"} {
		if n := queryInt(t, e.stranger.conn, `SELECT count(*)::int FROM dataenv.`+view+` WHERE workspace = $1`, ws); n != 0 {
			t.Errorf("the re-created workspace inherits %d rows of dataenv.%s", n, view)
		}
	}
	wantErr(t, "stranger", e.stranger.conn, "has no lake named", `SELECT dataenv.materialize($1, 'ducklake://main/t', 'SELECT 1')`, ws)
}

// TestADroppedForkKeepsItsIDUntilCleanedUp: a fork whose copy cannot be dropped stays registered
// under a tombstone: nobody creates its id again, only its owner (or an administrator) may finish
// the cleanup, and once that succeeds the id is free.
func TestADroppedForkKeepsItsIDUntilCleanedUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.victim()
	fork := wsID("g") // an id a root could take too (no "/")
	e.mustSucceed(e.request(e.owner.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, v.ws, fork))
	mustExec(t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, fork, e.member.name)
	v.fork = fork
	copyDB := names.ForkDatabase(v.fork, "d")
	ext := external.Connect(t, "postgres")
	marker := queryString(t, ext, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, copyDB)
	mustExec(t, ext, `COMMENT ON DATABASE `+ident(copyDB)+` IS 'tampered'`)
	e.mustFail(e.request(e.owner.conn, `SELECT dataenv.drop_fork($1)`, v.fork), "run dataenv.drop_fork again")
	if n := queryInt(t, e.sql, `SELECT count(*)::int FROM dataenv.workspace_tombstones WHERE id = $1 AND owner = $2`, v.fork, e.owner.name); n != 1 {
		t.Fatal("no tombstone records the dropped fork's owner")
	}
	// Nobody takes the id: not as a fork (its leftovers must be cleaned first, and cannot be)...
	e.mustFail(e.request(e.member.conn, `SELECT dataenv.create_fork($1, $2)`, v.ws, v.fork), "cannot be dropped yet")
	// ...and not through the table; the refusal tells a stranger nothing of what is left.
	err := sqlErr(e.stranger.conn, `INSERT INTO dataenv.workspaces (id) VALUES ($1)`, v.fork)
	if err == nil || !strings.Contains(err.Error(), "cleanup is not finished") || strings.Contains(err.Error(), copyDB) {
		t.Fatalf("stranger takes the dropped fork's id: %v", err)
	}
	// Only the owner (or an administrator) finishes the cleanup.
	// (to them there is nothing to clean up: they learn nothing of what is left)
	for _, u := range []user{e.stranger, e.member} {
		wantErr(t, u.name, u.conn, "nothing of a dropped one that", `INSERT INTO dataenv.requests (kind, args) VALUES ('drop_fork', jsonb_build_object('fork', $1::text))`, v.fork)
	}
	e.mustFail(e.bypass("drop_fork", `{"fork": "`+v.fork+`"}`, e.stranger.name), "permission denied")
	if !databaseExists(t, copyDB) {
		t.Fatal("the stranger's refused drop_fork dropped the copy")
	}
	mustExec(t, ext, `COMMENT ON DATABASE `+ident(copyDB)+` IS `+literal(marker))
	e.mustSucceed(e.request(e.owner.conn, `SELECT dataenv.drop_fork($1)`, v.fork))
	if n := queryInt(t, e.sql, `SELECT count(*)::int FROM dataenv.workspace_tombstones WHERE id = $1`, v.fork); n != 0 {
		t.Fatal("the tombstone outlived the cleanup")
	}
	e.mustSucceed(e.request(e.member.conn, `SELECT dataenv.create_fork($1, $2)`, v.ws, v.fork))
}

// TestRootIDsCannotLookLikeForks: "prod/x" is the shape of a fork of prod. A root cannot take
// it, and a fork with "/" sits under one of its own ancestors; existing-style fork ids without
// "/" keep working.
func TestRootIDsCannotLookLikeForks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	prod, mine := wsID("prod"), wsID("mine")
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, prod)
	mustExec(t, e.stranger.conn, `SELECT dataenv.create_workspace($1)`, mine)
	wantErr(t, "stranger", e.stranger.conn, "shape of a fork path", `SELECT dataenv.create_workspace($1)`, prod+"/x")
	wantErr(t, "stranger", e.stranger.conn, "shape of a fork path", `INSERT INTO dataenv.workspaces (id) VALUES ($1)`, prod+"/x")
	wantErr(t, "stranger", e.stranger.conn, "does not start with the id of its parent", `SELECT dataenv.create_fork($1, $2)`, mine, prod+"/x")
	e.mustSucceed(e.request(e.stranger.conn, `SELECT dataenv.create_fork($1, $2)`, mine, mine+"/x"))
	e.mustSucceed(e.request(e.stranger.conn, `SELECT dataenv.create_fork($1, $2)`, mine+"/x", mine+"/y"))
	e.mustSucceed(e.request(e.stranger.conn, `SELECT dataenv.create_fork($1, $2)`, mine, wsID("plain")))
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
