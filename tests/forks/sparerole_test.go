package forks_test

import (
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// spareFixture is a workspace with datatables (one parent each) whose first schema_only fork ran
// and whose refreshes made a template and a spare (with its role) for every datatable.
func spareFixture(t *testing.T, datatables ...string) (*fixture, user, string, map[string]string) {
	f := newFixture(t)
	a := f.newUser()
	ws := wsID("sr")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	parents := map[string]string{}
	modes := "{"
	for i, d := range datatables {
		p := f.parentDB("sr"+d, 3)
		parents[d] = p
		f.grantDatabase(a, f.name, p)
		mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, $2, $3, $4)`, ws, d, f.name, p)
		if i > 0 {
			modes += ", "
		}
		modes += `"` + d + `": "schema_only"`
	}
	modes += "}"
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, $3::jsonb)`, ws, wsID("f"), modes))
	for _, d := range datatables {
		f.mustSucceed(f.forkResult(r, d).Fidelity.Template.Request)
	}
	return f, a, ws, parents
}

// spareRoleOf is the role of the ready spare of workspace's datatable.
func spareRoleOf(t *testing.T, f *fixture, ws, datatable string) string {
	t.Helper()
	return queryString(t, f.sql, `SELECT role FROM dataenv.schema_templates WHERE workspace = $1 AND datatable = $2
		AND spare_of IS NOT NULL AND state = 'ready'`, ws, datatable)
}

// ownedBy fails unless every table of db is owned by role.
func ownedBy(t *testing.T, db, role string) {
	t.Helper()
	c := external.Connect(t, db)
	defer c.Close(t.Context())
	if n := queryInt(t, c, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'S', 'i') AND pg_get_userbyid(c.relowner) <> $1`, role); n != 0 {
		t.Fatalf("%d relations of %s are not owned by %s", n, db, role)
	}
}

// takenRolesOf lists the roles left on the cluster under fork's taken-spare role names
// (names.TakenSpareRole): the finish drops each once it re-owned its objects.
func takenRolesOf(t *testing.T, fork string) string {
	t.Helper()
	return queryString(t, external.Connect(t, "postgres"), `SELECT coalesce(string_agg(rolname, ','), '') FROM pg_roles
		WHERE rolname LIKE 'dataenv\_spare\_' || left(regexp_replace(lower($1), '[^a-z0-9]', '_', 'g'), 24) || '\_%'`, fork)
}

// TestSecondCopyOnAClusterTakesItsSpareToo: a fork with two schema_only datatables on one
// cluster takes both spares. The first copy's spare role becomes the fork's workspace role; the
// second copy finds that role made, so its spare's role is renamed for the copy, its objects are
// re-owned to the workspace role and it is dropped. Both copies are the fork role's and match
// their parents, and no spare role of either is left.
func TestSecondCopyOnAClusterTakesItsSpareToo(t *testing.T) {
	t.Parallel()
	f, a, ws, parents := spareFixture(t, "one", "two")
	roles := map[string]string{"one": spareRoleOf(t, f, ws, "one"), "two": spareRoleOf(t, f, ws, "two")}
	fork := wsID("f")
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"one": "schema_only", "two": "schema_only"}')`, ws, fork))
	ext := external.Connect(t, "postgres")
	for _, d := range []string{"one", "two"} {
		res := f.forkResult(r, d)
		if res.Method != "schema_template" || res.Fidelity.Template.Spare == "" {
			t.Fatalf("copy of %s made by %s from spare %q, want schema_template from a spare", d, res.Method, res.Fidelity.Template.Spare)
		}
		db := names.ForkDatabase(fork, d)
		if s, ps := schemaOf(t, db), schemaOf(t, parents[d]); s != ps {
			t.Fatalf("copy of %s differs from its parent:\n%s\n---\n%s", d, s, ps)
		}
		ownedBy(t, db, res.Fidelity.Owner)
		if n := queryInt(t, ext, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, roles[d]); n != 0 {
			t.Fatalf("the copy of %s took spare %s, but its role %s is still there", d, res.Fidelity.Template.Spare, roles[d])
		}
	}
	if left := takenRolesOf(t, fork); left != "" {
		t.Fatalf("taken spares' roles left on the cluster: %s", left)
	}
}

// TestResetForkTakesASpare: reset_fork of a schema_only fork of an unchanged parent takes the
// template's spare although the fork's workspace role exists: the new copy matches the parent,
// is the fork role's, the spare's role is gone, and the reset asks for the next spare, which the
// next fork takes.
func TestResetForkTakesASpare(t *testing.T) {
	t.Parallel()
	f, a, ws, parents := spareFixture(t, "d")
	fork := wsID("f")
	made := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)), "d")
	f.mustSucceed(made.Fidelity.Template.Request)
	spareRole := spareRoleOf(t, f, ws, "d")
	db := names.ForkDatabase(fork, "d")
	c := external.Connect(t, db)
	mustExec(t, c, `CREATE TABLE public.fork_only (x int)`)
	_ = c.Close(t.Context())

	res := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.reset_fork($1)`, fork)), "d")
	if res.Method != "schema_template" || res.Fidelity.Template.Spare == "" {
		t.Fatalf("reset copy made by %s from spare %q, want schema_template from a spare", res.Method, res.Fidelity.Template.Spare)
	}
	if s, ps := schemaOf(t, db), schemaOf(t, parents["d"]); s != ps {
		t.Fatalf("the reset copy differs from its parent:\n%s\n---\n%s", s, ps)
	}
	ownedBy(t, db, made.Fidelity.Owner)
	if res.Fidelity.Owner != made.Fidelity.Owner {
		t.Fatalf("the reset copy is owned by %s, the fork's role is %s", res.Fidelity.Owner, made.Fidelity.Owner)
	}
	if n := queryInt(t, external.Connect(t, "postgres"), `SELECT count(*) FROM pg_roles WHERE rolname = $1`, spareRole); n != 0 {
		t.Fatalf("the reset took the spare, but its role %s is still there", spareRole)
	}
	if left := takenRolesOf(t, fork); left != "" {
		t.Fatalf("taken spares' roles left on the cluster: %s", left)
	}
	f.mustSucceed(res.Fidelity.Template.Request)
	next := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, wsID("f"))), "d")
	if next.Fidelity.Template.Spare == "" {
		t.Fatal("the fork after the reset found no spare: the reset did not ask for the next one")
	}
}

// TestSpareWhoseRoleIsGoneIsNotTaken: a spare whose role is not there as recorded (renamed by
// someone else) is not taken: the fork copies the template and makes its role itself, changes
// nothing of the renamed role, and the refresh it asks for replaces the spare, which the next
// fork takes with its role.
func TestSpareWhoseRoleIsGoneIsNotTaken(t *testing.T) {
	t.Parallel()
	f, a, ws, parents := spareFixture(t, "d")
	role := spareRoleOf(t, f, ws, "d")
	ext := external.Connect(t, "postgres")
	moved := role + "_moved"
	mustExec(t, ext, `ALTER ROLE `+ident(role)+` RENAME TO `+ident(moved))
	t.Cleanup(func() {
		c := external.Connect(t, "postgres")
		defer c.Close(t.Context())
		_, _ = c.Exec(t.Context(), `DROP ROLE IF EXISTS `+ident(moved))
	})
	fork := func() forkFidelity {
		t.Helper()
		id := wsID("f")
		res := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, id)), "d")
		db := names.ForkDatabase(id, "d")
		if s, ps := schemaOf(t, db), schemaOf(t, parents["d"]); res.Method != "schema_template" || s != ps {
			t.Fatalf("fork made by %s; its schema:\n%s\n---\nthe parent's:\n%s", res.Method, s, ps)
		}
		ownedBy(t, db, res.Fidelity.Owner)
		return res
	}
	declined := fork()
	if declined.Fidelity.Template.Spare != "" {
		t.Fatalf("the fork took spare %s, whose role is gone", declined.Fidelity.Template.Spare)
	}
	if n := queryInt(t, ext, `SELECT count(*) FROM pg_roles WHERE rolname = $1 AND NOT rolcanlogin`, moved); n != 1 {
		t.Fatalf("the renamed role %s was changed or dropped", moved)
	}
	f.mustSucceed(declined.Fidelity.Template.Request)
	next := spareRoleOf(t, f, ws, "d")
	if next == role {
		t.Fatalf("the refresh kept the spare whose role is gone (%s)", role)
	}
	if took := fork(); took.Fidelity.Template.Spare == "" {
		t.Fatal("the fork after the refresh did not take the new spare")
	}
	if n := queryInt(t, ext, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, next); n != 0 {
		t.Fatalf("the spare's role %s is still there after a fork took the spare", next)
	}
}
