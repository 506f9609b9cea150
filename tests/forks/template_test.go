package forks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestSchemaTemplateFollowsTheParent: the first schema_only fork of a datatable is restored from
// a dump and asks for the datatable's schema template; the next one is a TEMPLATE copy of it.
// After a change to the parent's schema the template is never used stale: the next fork has the
// new schema (from a dump again), the template is rebuilt and the old one dropped. The template
// is marked, owned by the fork owner, closed to connections, and goes with its workspace. So do
// its spares: the refresh makes one, a fork takes it (renamed into its copy, its records gone)
// and asks for the next one.
func TestSchemaTemplateFollowsTheParent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("tp", 5)
	ws := wsID("tpl")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'shop', $2, $3)`, ws, f.name, p)
	var lastFork string
	fork := func(wantMethod string) forkFidelity {
		t.Helper()
		id := wsID("f")
		lastFork = id
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
	tpl := queryString(t, f.sql, `SELECT database FROM dataenv.schema_templates WHERE workspace = $1 AND state = 'ready' AND spare_of IS NULL`, ws)
	conn := external.Connect(t, "postgres")
	closedAndMarked := func(db, wantOwner string) {
		t.Helper()
		var allow, public bool
		var owner, comment string
		if err := conn.QueryRow(f.ctx, `SELECT datallowconn, pg_get_userbyid(datdba), shobj_description(oid, 'pg_database'),
			has_database_privilege('public', oid, 'CONNECT') FROM pg_database WHERE datname = $1`, db).Scan(&allow, &owner, &comment, &public); err != nil {
			t.Fatalf("database %q: %v", db, err)
		}
		if allow || public || owner != wantOwner || !strings.HasPrefix(comment, names.Marker) {
			t.Fatalf("%s: connections allowed %v, PUBLIC may connect %v, owner %s (want %s), comment %q", db, allow, public, owner, wantOwner, comment)
		}
	}
	closedAndMarked(tpl, f.appRole)
	spareOf := func(tpl string) (string, string) {
		t.Helper()
		db := queryString(t, f.sql, `SELECT database FROM dataenv.schema_templates WHERE spare_of = $1 AND state = 'ready'`, tpl)
		return db, queryString(t, f.sql, `SELECT role FROM dataenv.schema_templates WHERE database = $1`, db)
	}
	spare, spareRole := spareOf(tpl)
	closedAndMarked(spare, spareRole)
	// The spare's own role owns it and everything in it, and can do nothing.
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_roles WHERE rolname = $1 AND NOT rolcanlogin AND NOT rolsuper AND NOT rolcreatedb
		AND NOT rolcreaterole AND shobj_description(oid, 'pg_authid') LIKE $2 || '; spare role; %'`, spareRole, names.Marker); n != 1 {
		t.Fatalf("the spare's role %q is not a marked NOLOGIN role without attributes", spareRole)
	}
	used := fork("schema_template")
	if used.Fidelity.Template.Database != tpl || used.Fidelity.Template.Spare != spare {
		t.Fatalf("fork copied %q (spare %q), want the template %q and its spare %q", used.Fidelity.Template.Database,
			used.Fidelity.Template.Spare, tpl, spare)
	}
	if databaseExists(t, spare) || queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_databases WHERE name = $1`, spare) != 0 ||
		queryInt(t, f.sql, `SELECT count(*) FROM dataenv.schema_templates WHERE database = $1`, spare) != 0 {
		t.Fatalf("the spare %s the fork took is still there under its name, or recorded", spare)
	}
	// The fork took the spare's role as its workspace role: gone under its name, and the fork's
	// role logs in and owns the copy and its tables.
	copyDB := names.ForkDatabase(lastFork, "shop")
	copyConn := external.Connect(t, copyDB)
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, spareRole); n != 0 {
		t.Fatalf("the spare's role %s is still there after a fork took the spare", spareRole)
	}
	if n := queryInt(t, copyConn, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r' AND pg_get_userbyid(c.relowner) <> $1`, used.Fidelity.Owner); n != 0 {
		t.Fatalf("%d tables of the copy made from the spare are not owned by the fork's role %s", n, used.Fidelity.Owner)
	}
	copyConn.Close(f.ctx)
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_roles WHERE rolname = $1 AND rolcanlogin
		AND pg_get_userbyid((SELECT datdba FROM pg_database WHERE datname = $2)) = $1`, used.Fidelity.Owner, copyDB); n != 1 {
		t.Fatalf("the fork's role %s cannot log in or does not own its copy", used.Fidelity.Owner)
	}
	f.mustSucceed(used.Fidelity.Template.Request)
	next, nextRole := spareOf(tpl)
	if next == spare {
		t.Fatalf("the refresh after the fork kept the taken spare %s", spare)
	}
	closedAndMarked(next, nextRole)

	pc := external.Connect(t, p)
	mustExec(t, pc, `SET ROLE `+ident(f.appRole)+`; ALTER TABLE orders ADD COLUMN note text; CREATE INDEX orders_note_idx ON orders (note)`)
	changed := fork("dump") // compared with the changed parent inside fork()
	f.mustSucceed(changed.Fidelity.Template.Request)
	tpl2 := queryString(t, f.sql, `SELECT string_agg(database, ',') FROM dataenv.schema_templates WHERE workspace = $1 AND spare_of IS NULL`, ws)
	if tpl2 == tpl || strings.Contains(tpl2, ",") || databaseExists(t, tpl) || databaseExists(t, next) {
		t.Fatalf("after the schema change the templates are %q (the old one %s exists: %v, its spare %s: %v)", tpl2, tpl,
			databaseExists(t, tpl), next, databaseExists(t, next))
	}
	if all := queryString(t, f.sql, `SELECT string_agg(coalesce(spare_of, '-'), ',') FROM dataenv.schema_templates WHERE workspace = $1`, ws); all != "-,"+tpl2 &&
		all != tpl2+",-" {
		t.Fatalf("after the rebuild the rows are %q, want the template %s and one spare of it", all, tpl2)
	}
	if databaseExists(t, next) || queryInt(t, conn, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, nextRole) != 0 {
		t.Fatalf("the spare %s of the outdated template, or its role %s, is left", next, nextRole)
	}
	spare2, _ := spareOf(tpl2)
	fork("schema_template")

	// A TRUNCATE, a refresh or a vacuum of the parent is no schema change.
	mustExec(t, pc, `SET ROLE `+ident(f.appRole)+`; TRUNCATE orders, customers`)
	mustExec(t, pc, `VACUUM FULL customers`)
	mustExec(t, pc, `ANALYZE`)
	fork("schema_template")

	mustExec(t, a.conn, `SELECT dataenv.drop_workspace($1)`, ws)
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
	left := queryString(t, f.sql, `SELECT coalesce(string_agg(database, ','), '') FROM dataenv.schema_templates WHERE workspace = $1`, ws)
	if databaseExists(t, tpl2) || databaseExists(t, spare2) || left != "" {
		t.Fatalf("template %s or spare %s survived its workspace (rows left: %q)", tpl2, spare2, left)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_database WHERE datname LIKE 'dataenv\_tpl\_' || $1 || '%'`,
		strings.ReplaceAll(ws, "-", "_")); n != 0 {
		t.Fatalf("%d template or spare databases of %s left on the cluster", n, ws)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_roles WHERE rolname LIKE 'dataenv\_spare\_' || $1 || '%'`,
		strings.ReplaceAll(ws, "-", "_")); n != 0 {
		t.Fatalf("%d spare roles of %s left on the cluster", n, ws)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_database_uses($1, $2) WHERE kind = 'schema template'`, f.name, p); n != 0 {
		t.Fatalf("the parent still lists %d schema template uses", n)
	}
}

// TestEntryDroppedWhileItsRefreshRunsLeavesNoTemplate: a refresh_schema_template request still
// pending when its datatable entry is removed, and run before that removal commits, still sees
// the entry and keeps the template and its spare. The removal files a cleanup of its own in any
// case, run after it commits, so nothing is left behind. (It used to file none while a refresh
// was pending: the templates of a dropped workspace stayed, found by a clean-clone run.)
func TestEntryDroppedWhileItsRefreshRunsLeavesNoTemplate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("tr", 3)
	ws := wsID("tr")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'shop', $2, $3)`, ws, f.name, p)
	first := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"shop": "schema_only"}')`,
		ws, wsID("f"))), "shop")
	f.mustSucceed(first.Fidelity.Template.Request)
	dbs := queryString(t, f.sql, `SELECT string_agg(database, ',') FROM dataenv.schema_templates WHERE workspace = $1`, ws)
	if strings.Count(dbs, ",") != 1 {
		t.Fatalf("want a template and its spare, have %q", dbs)
	}

	if err := f.sidecar.Stop(30 * time.Second); err != nil {
		t.Fatalf("stop the sidecar: %v", err)
	}
	pending := f.request(f.sql, `SELECT dataenv.refresh_schema_template($1, 'shop')`, ws)
	tx, err := a.conn.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, `SELECT dataenv.drop_workspace($1)`, ws); err != nil {
		t.Fatalf("drop_workspace: %v", err)
	}
	f.sidecar = f.startSidecar()
	if r := f.mustSucceed(pending); !strings.Contains(string(r.result), `"unchanged"`) {
		t.Fatalf("the pending refresh, run before the drop commits, should keep the templates: %s", r.result)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatalf("commit the drop: %v", err)
	}
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
	if left := queryString(t, f.sql, `SELECT coalesce(string_agg(database, ','), '') FROM dataenv.schema_templates WHERE workspace = $1`, ws); left != "" {
		t.Fatalf("the dropped workspace's templates are still recorded: %s", left)
	}
	for _, db := range strings.Split(dbs, ",") {
		if databaseExists(t, db) {
			t.Errorf("template or spare %s survived its workspace", db)
		}
	}
}

// TestRemovingADatatableWhileItsTemplateIsBuilt: the datatable entry is removed while a refresh
// of its schema template has read the entry but not registered the template yet (here it waits
// for the cluster's lifecycle lock, which the test holds). The removal still enqueues the
// cleanup, which waits for the build and drops the template it made, and the spare: no database
// is left for an entry that no longer exists.
func TestRemovingADatatableWhileItsTemplateIsBuilt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	db := f.parentDB("rm", 3)
	ws := wsID("ws")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, db)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, db)

	holder := control.Connect(t, f.controlDB)
	mustExec(t, holder, `SELECT pg_advisory_lock(dataenv.lock_class('lifecycle'), hashtext($1))`, f.name)
	build := f.request(a.conn, `SELECT dataenv.refresh_schema_template($1, 'd')`, ws)
	// It waits for the lock in its check of the parent, after it read the entry.
	for deadline := time.Now().Add(time.Minute); queryInt(t, holder, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = dataenv.lock_class('lifecycle')::oid`) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the build does not wait for the lifecycle lock")
		}
	}
	mustExec(t, a.conn, `SELECT dataenv.remove_datatable($1, 'd')`, ws)
	cleanup := f.pendingRequest(t, "refresh_schema_template", ws)
	mustExec(t, holder, `SELECT pg_advisory_unlock(dataenv.lock_class('lifecycle'), hashtext($1))`, f.name)
	if cleanup == build {
		t.Fatal("removing the datatable enqueued no cleanup of the template being built")
	}
	f.mustSucceed(build)
	f.mustSucceed(cleanup)
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.schema_templates WHERE workspace = $1`, ws); n != 0 {
		t.Fatalf("%d schema templates are left for the removed datatable", n)
	}
	built := queryString(t, f.sql, `SELECT coalesce(result->>'database', '') || ' ' || coalesce(result->>'spare', '') FROM dataenv.requests WHERE id = $1::uuid`, build)
	for _, d := range strings.Fields(built) {
		if databaseExists(t, d) {
			t.Errorf("database %s, built for the removed datatable, is left", d)
		}
	}
	if strings.TrimSpace(built) == "" {
		t.Fatalf("the build made no template: %q", built)
	}
}
