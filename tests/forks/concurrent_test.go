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

// TestConcurrentForksShareOneSpare: schema_only forks of one parent made at the same time, with
// one spare of the datatable's schema template ready. At most one fork takes each spare (a
// claim another fork won is a 0-row compare-and-set, and the loser copies the template); every
// fork has the parent's schema; and once the refreshes they asked for have run, the datatable
// has one template and one spare, and no other database of its template's name.
func TestConcurrentForksShareOneSpare(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("cs", 5)
	ws := wsID("cs")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	first := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, wsID("f0"))), "d")
	f.mustSucceed(first.Fidelity.Template.Request) // the template and its spare

	f.sidecar.Kill()
	forks := []string{wsID("f1"), wsID("f2"), wsID("f3")}
	var ids []string
	for _, fork := range forks {
		ids = append(ids, f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork))
	}
	f.sidecar = f.startSidecar()
	taken := map[string]string{}
	for i, id := range ids {
		res := f.forkResult(f.mustSucceed(id), "d")
		if res.Method != "schema_template" {
			t.Errorf("fork %s made by %q, want schema_template (%+v)", forks[i], res.Method, res.Fidelity.Template)
		}
		if sp := res.Fidelity.Template.Spare; sp != "" {
			if other, dup := taken[sp]; dup {
				t.Errorf("spare %s taken by both %s and %s", sp, other, forks[i])
			}
			taken[sp] = forks[i]
		}
		if s, ps := schemaOf(t, names.ForkDatabase(forks[i], "d")), schemaOf(t, p); s != ps {
			t.Errorf("fork %s differs from its parent:\n--- fork\n%s\n--- parent\n%s", forks[i], s, ps)
		}
		f.mustSucceed(res.Fidelity.Template.Request)
	}
	if len(taken) == 0 {
		t.Error("no fork took the ready spare")
	}
	t.Logf("spares taken: %v", taken)
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.requests WHERE kind = 'refresh_schema_template'
		AND args->>'workspace' = $1 AND status NOT IN ('succeeded', 'failed')`, ws); n != 0 {
		t.Fatalf("%d template refreshes still unfinished after the forks' own", n)
	}
	var templates, spares int
	if err := f.sql.QueryRow(f.ctx, `SELECT count(*) FILTER (WHERE spare_of IS NULL), count(*) FILTER (WHERE spare_of IS NOT NULL)
		FROM dataenv.schema_templates WHERE workspace = $1 AND state = 'ready'`, ws).Scan(&templates, &spares); err != nil {
		t.Fatal(err)
	}
	rows := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.schema_templates WHERE workspace = $1`, ws)
	if templates != 1 || spares != 1 || rows != 2 {
		t.Errorf("after the refreshes: %d ready templates, %d ready spares, %d ledger rows; want 1, 1, 2", templates, spares, rows)
	}
	name := names.SchemaTemplate(ws, "d", "x")
	prefix := name[:len(name)-len("hash8xyz")] // every build of this datatable's template
	conn := external.Connect(t, "postgres")
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_database WHERE starts_with(datname, $1)`, prefix); n != 2 {
		t.Errorf("%d databases named %s*, want the template and its spare", n, prefix)
	}
}
