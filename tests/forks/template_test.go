package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestSchemaTemplateFollowsTheParent: the first schema_only fork of a datatable is restored from
// a dump and asks for the datatable's schema template; the next one is a TEMPLATE copy of it.
// After a change to the parent's schema the template is never used stale: the next fork has the
// new schema (from a dump again), the template is rebuilt and the old one dropped. The template
// is marked, owned by the fork owner, closed to connections, and goes with its workspace.
func TestSchemaTemplateFollowsTheParent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("tp", 5)
	ws := wsID("tpl")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'shop', $2, $3)`, ws, f.name, p)
	fork := func(wantMethod string) forkFidelity {
		t.Helper()
		id := wsID("f")
		res := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"shop": "schema_only"}')`, ws, id)), "shop")
		if res.Method != wantMethod {
			t.Fatalf("schema_only fork made by %q, want %q (%+v)", res.Method, wantMethod, res.Fidelity)
		}
		if s, ps := schemaOf(t, names.ForkDatabase(id, "shop")), schemaOf(t, p); s != ps {
			t.Fatalf("fork by %s differs from its parent:\n--- fork\n%s\n--- parent\n%s", wantMethod, s, ps)
		}
		return res
	}
	first := fork("dump")
	f.mustSucceed(first.Fidelity.Template.Request)
	tpl := queryString(t, f.sql, `SELECT database FROM dataenv.schema_templates WHERE workspace = $1 AND state = 'ready'`, ws)
	conn := external.Connect(t, "postgres")
	var allow bool
	var owner, comment string
	if err := conn.QueryRow(f.ctx, `SELECT datallowconn, pg_get_userbyid(datdba), shobj_description(oid, 'pg_database')
		FROM pg_database WHERE datname = $1`, tpl).Scan(&allow, &owner, &comment); err != nil {
		t.Fatalf("template %q: %v", tpl, err)
	}
	if allow || owner != f.appRole || !strings.HasPrefix(comment, names.Marker) {
		t.Fatalf("template %s: connections allowed %v, owner %s, comment %q", tpl, allow, owner, comment)
	}
	if used := fork("schema_template"); used.Fidelity.Template.Database != tpl {
		t.Fatalf("fork copied %q, want the template %q", used.Fidelity.Template.Database, tpl)
	}

	pc := external.Connect(t, p)
	mustExec(t, pc, `SET ROLE `+ident(f.appRole)+`; ALTER TABLE orders ADD COLUMN note text; CREATE INDEX orders_note_idx ON orders (note)`)
	changed := fork("dump") // compared with the changed parent inside fork()
	f.mustSucceed(changed.Fidelity.Template.Request)
	tpl2 := queryString(t, f.sql, `SELECT string_agg(database, ',') FROM dataenv.schema_templates WHERE workspace = $1`, ws)
	if tpl2 == tpl || strings.Contains(tpl2, ",") || databaseExists(t, tpl) {
		t.Fatalf("after the schema change the templates are %q (the old one %s exists: %v)", tpl2, tpl, databaseExists(t, tpl))
	}
	fork("schema_template")

	// A TRUNCATE, a refresh or a vacuum of the parent is no schema change.
	mustExec(t, pc, `SET ROLE `+ident(f.appRole)+`; TRUNCATE orders, customers`)
	mustExec(t, pc, `VACUUM FULL customers`)
	mustExec(t, pc, `ANALYZE`)
	fork("schema_template")

	mustExec(t, a.conn, `SELECT dataenv.drop_workspace($1)`, ws)
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
	if databaseExists(t, tpl2) {
		t.Fatalf("template %s survived its workspace", tpl2)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_database_uses($1, $2) WHERE kind = 'schema template'`, f.name, p); n != 0 {
		t.Fatalf("the parent still lists %d schema template uses", n)
	}
}
