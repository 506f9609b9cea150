package security_test

import (
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestOtherTenantsStayInvisible: the helper functions and views that told any user other
// tenants' workspace ids, members and lake names (is_workspace_member(any, any),
// check_shared_lakes, managed_database_list.for_workspace, workspace_facts' children, ...) answer
// a stranger nothing about the victim's workspaces, while its owner sees them.
func TestOtherTenantsStayInvisible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.victim()
	copyDB := names.ForkDatabase(v.fork, "d")
	type probe struct{ sql, stranger, owner string }
	for _, p := range []probe{
		{`SELECT dataenv.is_workspace_member($1, $2)::text`, "false", "true"},
		{`SELECT coalesce(dataenv.workspace_access($1, $2), 'none')`, "none", "owner"},
		{`SELECT (dataenv.workspace_facts($1)).children::text WHERE $2::name IS NOT NULL`, "{}", "{" + v.fork + "}"},
		{`SELECT coalesce((dataenv.workspace_facts($1)).is_fork::text, 'hidden') WHERE $2::name IS NOT NULL`, "hidden", "false"},
		// the fork's copy, and the schema template of the victim's datatable with its spare
		// (victim() waits for the refresh that builds both)
		{`SELECT count(*)::text FROM dataenv.managed_database_list WHERE for_workspace LIKE $1 || '%' AND $2::name IS NOT NULL`, "0", "3"},
		{`SELECT count(*)::text FROM dataenv.lake_info WHERE workspace LIKE $1 || '%' AND $2::name IS NOT NULL`, "0", "2"},
		{`SELECT count(*)::text FROM dataenv.workspace_chain WHERE workspace LIKE $1 || '%' AND $2::name IS NOT NULL`, "0", "3"},
		{`SELECT count(*)::text FROM dataenv.fork_copy_list WHERE workspace LIKE $1 || '%' AND $2::name IS NOT NULL`, "0", "1"},
		{`SELECT count(*)::text FROM dataenv.materialization_list WHERE workspace LIKE $1 || '%' AND $2::name IS NOT NULL`, "0", "1"},
		{`SELECT dataenv.workspace_has_leftovers($1)::text WHERE $2::name IS NOT NULL`, "false", "false"},
	} {
		if got := queryString(t, e.stranger.conn, p.sql, v.ws, e.owner.name); got != p.stranger {
			t.Errorf("stranger: %s = %s, want %s", p.sql, got, p.stranger)
		}
		if got := queryString(t, e.owner.conn, p.sql, v.ws, e.owner.name); got != p.owner {
			t.Errorf("owner: %s = %s, want %s", p.sql, got, p.owner)
		}
	}
	// Internal helpers that answer for any id are not callable by users.
	for _, sql := range []string{
		`SELECT dataenv.check_shared_lakes($1, ARRAY['main'])`,
		`SELECT dataenv.lake_workspace_exists($1)`,
		`SELECT dataenv.fork_copy_leftovers($1)`,
		`SELECT * FROM dataenv.workspace_leftovers($1)`,
		`SELECT dataenv.fork_lake_leftovers($1)`,
		`SELECT * FROM dataenv.workspace_tombstones WHERE id = $1`,
	} {
		wantDenied(t, "stranger", e.stranger.conn, sql, v.ws)
	}
	// Authorization answers are for oneself only.
	wantErr(t, "stranger", e.stranger.conn, "may not make or check requests for",
		`SELECT dataenv.authorize_request('run', jsonb_build_object('workspace', $1::text), $2)`, v.ws, e.owner.name)
	// A shared lake that exists and one that does not are refused alike for a non-member.
	for _, lake := range []string{"main", "nope"} {
		wantErr(t, "stranger", e.stranger.conn, "may use",
			`SELECT dataenv.create_fork($1, 'x', '{}', ARRAY[$2])`, v.ws, lake)
	}
	// A job in a workspace the caller may not use is refused the same way whether it exists.
	wantErr(t, "stranger", e.stranger.conn, "(or there is no such workspace)", `SELECT dataenv.run($1, 'SELECT 1')`, v.ws)
	wantErr(t, "stranger", e.stranger.conn, "(or there is no such workspace)", `SELECT dataenv.run('no-such-ws', 'SELECT 1')`)
	if n := queryInt(t, e.stranger.conn, `SELECT count(*)::int FROM dataenv.managed_database_list WHERE name = $1`, copyDB); n != 0 {
		t.Error("the stranger sees the victim's fork copy")
	}
}
