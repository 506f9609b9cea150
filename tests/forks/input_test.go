package forks_test

import (
	"strings"
	"testing"
)

// TestBadInputChangesNothing: every function refuses bad input at call time with an error that
// names what is wrong, and nothing is inserted.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	ws := wsID("ws")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, "somedb")
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, 'somedb')`, ws, f.name)
	before := queryInt(t, f.sql, `SELECT (SELECT count(*) FROM dataenv.requests) + (SELECT count(*) FROM dataenv.workspaces)
		+ (SELECT count(*) FROM dataenv.datatables) + (SELECT count(*) FROM dataenv.workspace_members)`)
	cases := []struct{ sql, want string }{
		{`SELECT dataenv.create_workspace('Upper')`, "not allowed"},
		{`SELECT dataenv.create_workspace('a//b')`, "not allowed"},
		{`SELECT dataenv.create_workspace('` + strings.Repeat("x", 64) + `')`, "limit is 63"},
		{`SELECT dataenv.create_workspace(NULL)`, "required"},
		{`SELECT dataenv.create_workspace('` + ws + `')`, "already exists"},
		{`SELECT dataenv.add_datatable('` + ws + `', 'Bad Name', '` + f.name + `', 'db')`, "datatable name"},
		{`SELECT dataenv.add_datatable('` + ws + `', 'd2', 'nocluster', 'db')`, "no cluster"},
		{`SELECT dataenv.add_datatable('` + ws + `', 'd2', '` + f.name + `', 'db;drop')`, "not allowed"},
		{`SELECT dataenv.add_datatable('` + ws + `', 'd', '` + f.name + `', 'db')`, "already has a datatable"},
		{`SELECT dataenv.add_datatable('nows', 'd', '` + f.name + `', 'db')`, "may use"},
		{`SELECT dataenv.create_fork('` + ws + `', 'f', '{"d": "copy_everything"}')`, "mode must be"},
		{`SELECT dataenv.create_fork('` + ws + `', 'f', '{"nope": "schema_only"}')`, "has no datatable"},
		{`SELECT dataenv.create_fork('` + ws + `', 'f', '["d"]')`, "must be a JSON object"},
		{`SELECT dataenv.create_fork('` + ws + `', 'F!')`, "not allowed"},
		{`SELECT dataenv.create_fork('` + ws + `', '` + ws + `')`, "already exists"},
		{`SELECT dataenv.create_fork('` + ws + `', 'f', '{}', ARRAY['Bad Lake'])`, "shared_lakes"},
		{`INSERT INTO dataenv.requests (kind, args) VALUES ('create_fork', '{"parent": "` + ws + `", "fork": "f", "extra": 1}')`, "unknown argument"},
		{`SELECT dataenv.drop_fork('` + ws + `')`, "not a fork"},
		{`SELECT dataenv.drop_fork('nothing-here')`, "no workspace"},
		{`SELECT dataenv.grant_workspace('` + ws + `', 'no_such_role')`, "no role"},
		{`SELECT dataenv.remove_datatable('` + ws + `', 'nope')`, "no datatable"},
		{`SELECT * FROM dataenv.resolve_datatable('` + ws + `', 'nope')`, "has no datatable"},
	}
	for _, c := range cases {
		if err := sqlErr(a.conn, c.sql); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.sql, err, c.want)
		}
	}
	after := queryInt(t, f.sql, `SELECT (SELECT count(*) FROM dataenv.requests) + (SELECT count(*) FROM dataenv.workspaces)
		+ (SELECT count(*) FROM dataenv.datatables) + (SELECT count(*) FROM dataenv.workspace_members)`)
	if after != before {
		t.Fatalf("bad input changed rows: %d -> %d", before, after)
	}
	// Every function of the area has a comment.
	if n := queryInt(t, f.sql, `SELECT count(*) FROM pg_proc p WHERE p.pronamespace = 'dataenv'::regnamespace
		AND p.proname IN ('create_workspace', 'drop_workspace', 'add_datatable', 'remove_datatable', 'grant_workspace',
		  'revoke_workspace', 'create_fork', 'drop_fork', 'resolve_datatable', 'fork_chain', 'can_use_workspace',
		  'is_workspace_member', 'validate_create_fork', 'validate_drop_fork', 'managed_database_uses__workspaces',
		  'workspace_facts', 'fork_copy_leftovers', 'check_workspace_id', 'check_datatable_name', 'workspace_lock_class',
		  'workspaces_before_update', 'workspaces_after_insert', 'datatables_before_write')
		AND obj_description(p.oid, 'pg_proc') IS NULL`); n != 0 {
		t.Fatalf("%d functions without a comment", n)
	}
}
