package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// differences are the rows of dataenv.fork_differences for a compare_fork request, as u sees
// them: "area name kind object change" each (detail left out).
func (f *fixture) differences(u user, id string) []string {
	f.t.Helper()
	rows, err := u.conn.Query(f.ctx, `SELECT area, name, coalesce(object_kind, '-'), coalesce(object, '-'), change, coalesce(detail, '')
		FROM dataenv.fork_differences($1::uuid, '120 s')`, id)
	if err != nil {
		f.t.Fatalf("fork_differences(%s): %v", id, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var area, name, kind, object, change, detail string
		if err := rows.Scan(&area, &name, &kind, &object, &change, &detail); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, strings.Join([]string{area, name, kind, object, change}, " "))
	}
	if err := rows.Err(); err != nil {
		f.t.Fatalf("fork_differences(%s): %v", id, err)
	}
	return out
}

// TestCompareForkListsWhatTheForkChanged: in a schema_only copy, a column, an index, a function
// and a view are added and a table is dropped; compare_fork lists exactly those (the dropped
// table once, not its columns and constraints), says the keep_original datatable shares the
// parent's database, and is refused to a non-member, and to a member of the fork alone; an
// orphaned fork's copy has nothing to be compared with.
func TestCompareForkListsWhatTheForkChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice, bob, carol := f.newUser(), f.newUser(), f.newUser()
	p := f.parentDB("cmp", 3)
	pc := f.pg.Connect(t, p)
	mustExec(t, pc, `SET ROLE `+ident(f.appRole))
	mustExec(t, pc, `CREATE TABLE scratch (id int PRIMARY KEY, note text CHECK (note <> ''))`)
	_ = pc.Close(f.ctx)
	shared := f.parentDB("cmpk", 1)
	ws, fork := wsID("cmp"), wsID("cmpf")
	mustExec(t, alice.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(alice, f.name, p)
	f.grantDatabase(alice, f.name, shared)
	mustExec(t, alice.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	mustExec(t, alice.conn, `SELECT dataenv.add_datatable($1, 'k', $2, $3)`, ws, f.name, shared)
	f.mustSucceed(f.request(alice.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork))

	// Nothing changed yet.
	id := f.request(alice.conn, `SELECT dataenv.compare_fork($1)`, fork)
	if got, want := strings.Join(f.differences(alice, id), "\n"), "datatable d - - unchanged\ndatatable k - - shared"; got != want {
		t.Fatalf("compare_fork of a fresh fork:\n%s\nwant:\n%s", got, want)
	}

	// The fork's members migrate their copy as the fork's role.
	fc := f.pg.Connect(t, names.ForkDatabase(fork, "d"))
	mustExec(t, fc, `SET ROLE `+ident(f.forkRole(fork)))
	mustExec(t, fc, `
		ALTER TABLE orders ADD COLUMN note text;
		CREATE INDEX orders_note_idx ON orders (note);
		CREATE FUNCTION order_total(customer bigint) RETURNS numeric LANGUAGE sql STABLE
		    AS $$ SELECT sum(amount) FROM orders WHERE customer_id = customer $$;
		CREATE VIEW customer_emails AS SELECT email FROM customers;
		DROP TABLE scratch;`)
	_ = fc.Close(f.ctx)

	id = f.request(alice.conn, `SELECT dataenv.compare_fork($1)`, fork)
	got := strings.Join(f.differences(alice, id), "\n")
	want := strings.Join([]string{
		"datatable d table public.scratch removed",
		"datatable d column public.orders.note added",
		"datatable d index public.orders_note_idx added",
		"datatable d view public.customer_emails added",
		"datatable d function public.order_total(customer bigint) added",
		"datatable k - - shared",
	}, "\n")
	if got != want {
		t.Fatalf("compare_fork after the migration:\n%s\nwant:\n%s", got, want)
	}
	var detail string
	if err := alice.conn.QueryRow(f.ctx, `SELECT detail FROM dataenv.fork_differences($1::uuid) WHERE object = 'public.orders.note'`, id).
		Scan(&detail); err != nil || detail != "type text, nullability nullable" {
		t.Fatalf("detail of the added column: %q, %v", detail, err)
	}

	// The copy's owner plants functions named like the catalog functions the comparison uses: the
	// admin's pinned search_path never reaches them (one running would fail the request), and
	// they are listed as what they are, functions the fork added.
	fc = f.pg.Connect(t, names.ForkDatabase(fork, "d"))
	mustExec(t, fc, `SET ROLE `+ident(f.forkRole(fork)))
	for _, sig := range []string{"format_type(oid, integer)", "pg_get_functiondef(oid)", "pg_get_viewdef(oid)", "starts_with(text, text)"} {
		mustExec(t, fc, `CREATE FUNCTION public.`+sig+` RETURNS text LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'trap ran as %', current_user; END$$`)
	}
	_ = fc.Close(f.ctx)
	id = f.request(alice.conn, `SELECT dataenv.compare_fork($1)`, fork)
	var traps []string
	for _, d := range f.differences(alice, id) {
		if strings.HasPrefix(d, "datatable d function public.") && !strings.Contains(d, "order_total") {
			traps = append(traps, d)
		}
	}
	if got := strings.Join(traps, "\n"); got != strings.Join([]string{
		"datatable d function public.format_type(oid, integer) added",
		"datatable d function public.pg_get_functiondef(oid) added",
		"datatable d function public.pg_get_viewdef(oid) added",
		"datatable d function public.starts_with(text, text) added",
	}, "\n") {
		t.Fatalf("planted functions:\n%s", got)
	}

	// Another user sees neither the fork nor alice's comparison.
	if err := sqlErr(bob.conn, `SELECT dataenv.compare_fork($1)`, fork); err == nil || !strings.Contains(err.Error(), "may not use workspace") {
		t.Fatalf("bob, no member of the fork, compared it: %v", err)
	}
	if err := sqlErr(bob.conn, `SELECT * FROM dataenv.fork_differences($1::uuid)`, id); err == nil || !strings.Contains(err.Error(), "no request") {
		t.Fatalf("bob read alice's comparison: %v", err)
	}
	// A member of the fork alone may not see the parent's current schema through it.
	mustExec(t, alice.conn, `SELECT dataenv.grant_workspace($1, $2)`, fork, carol.name)
	f.mustFail(f.request(carol.conn, `SELECT dataenv.compare_fork($1)`, fork), "but not its parent")
	// fork_differences shows compare_fork requests only.
	createID := queryString(t, f.sql, `SELECT created_by_request::text FROM dataenv.workspaces WHERE id = $1`, fork)
	if err := sqlErr(alice.conn, `SELECT * FROM dataenv.fork_differences($1::uuid)`, createID); err == nil ||
		!strings.Contains(err.Error(), "not a compare_fork one") {
		t.Fatalf("fork_differences of a create_fork request: %v", err)
	}
	// Comparing a root is refused at once.
	if err := sqlErr(alice.conn, `SELECT dataenv.compare_fork($1)`, ws); err == nil || !strings.Contains(err.Error(), "is not a fork") {
		t.Fatalf("compare_fork of a root: %v", err)
	}

	// An orphaned fork has no parent to compare its copy with, and says so.
	mustExec(t, alice.conn, `SELECT dataenv.drop_workspace($1)`, ws)
	id = f.request(alice.conn, `SELECT dataenv.compare_fork($1)`, fork)
	if got, want := strings.Join(f.differences(alice, id), "\n"), "datatable d - - no_parent\ndatatable k - - shared"; got != want {
		t.Fatalf("compare_fork of an orphaned fork:\n%s\nwant:\n%s", got, want)
	}
	f.mustSucceed(f.request(alice.conn, `SELECT dataenv.drop_fork($1)`, fork))
}
