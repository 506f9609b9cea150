package security_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

// TestBindingNeedsAGrant: a dataenv user binds only databases an administrator granted it; a
// plain INSERT into dataenv.datatables gets the same check; the error says what to do. (Before:
// add_datatable bound any database of any cluster, another tenant's included.)
func TestBindingNeedsAGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	db := e.parentDB("theirs")
	ws := wsID("mine")
	mustExec(t, e.stranger.conn, `SELECT dataenv.create_workspace($1)`, ws)
	err := sqlErr(e.stranger.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, e.cluster, db)
	if pe := pgError(err); pe == nil || pe.Code != "42501" || !strings.Contains(pe.Message, "may not bind") || !strings.Contains(pe.Hint, "SELECT dataenv.grant_database(") {
		t.Fatalf("stranger binds another's database: %v, want a refusal whose hint names dataenv.grant_database", err)
	}
	wantDenied(t, "stranger", e.stranger.conn, `INSERT INTO dataenv.datatables (workspace, name, cluster, database) VALUES ($1, 'd', $2, $3)`, ws, e.cluster, db)
	wantDenied(t, "stranger", e.stranger.conn, `SELECT dataenv.grant_database($1, $2, $3)`, e.cluster, db, e.stranger.name)
	if n := queryInt(t, e.sql, `SELECT count(*)::int FROM dataenv.datatables WHERE workspace = $1`, ws); n != 0 {
		t.Fatalf("%d datatables bound without a grant", n)
	}

	mustExec(t, e.admin.conn, `SELECT dataenv.grant_database($1, $2, $3)`, e.cluster, db, e.stranger.name)
	if got := queryString(t, e.stranger.conn, `SELECT string_agg(database, ',') FROM dataenv.database_grant_list`); got != db {
		t.Fatalf("the grantee sees grants %q", got)
	}
	if n := queryInt(t, e.owner.conn, `SELECT count(*)::int FROM dataenv.database_grant_list`); n != 0 {
		t.Fatalf("another user sees %d grants", n)
	}
	mustExec(t, e.stranger.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, e.cluster, db)
	mustExec(t, e.admin.conn, `SELECT dataenv.revoke_database($1, $2, $3)`, e.cluster, db, e.stranger.name)
	wantErr(t, "stranger after the revoke", e.stranger.conn, "may not bind", `SELECT dataenv.add_datatable($1, 'd2', $2, $3)`, ws, e.cluster, db)
	// An administrator binds without a grant.
	mustExec(t, e.admin.conn, `SELECT dataenv.add_datatable($1, 'd3', $2, $3)`, ws, e.cluster, db)
	// A plain revoke leaves what was bound under the grant; unbind removes exactly that (the
	// stranger's binding), also after the grant is gone, and keeps the administrator's.
	bound := `SELECT string_agg(name, ',' ORDER BY name) FROM dataenv.datatables WHERE workspace = $1`
	if got := queryString(t, e.sql, bound, ws); got != "d,d3" {
		t.Fatalf("datatables after a plain revoke: %s", got)
	}
	wantErr(t, "a second plain revoke", e.admin.conn, "is not granted", `SELECT dataenv.revoke_database($1, $2, $3)`, e.cluster, db, e.stranger.name)
	wantDenied(t, "stranger", e.stranger.conn, `SELECT dataenv.revoke_database($1, $2, $3, unbind => true)`, e.cluster, db, e.stranger.name)
	mustExec(t, e.admin.conn, `SELECT dataenv.revoke_database($1, $2, $3, unbind => true)`, e.cluster, db, e.stranger.name)
	if got := queryString(t, e.sql, bound, ws); got != "d3" {
		t.Fatalf("datatables after revoke with unbind: %s, want the administrator's d3 only", got)
	}
}

// TestNobodyBindsTheControlDatabase: the attack that made any user superuser. A user binding
// the control database (then attaching it in a job to read dataenv.cluster_secrets) is refused at
// call time, and so is an administrator, for a datatable, a grant or a lake catalog.
func TestNobodyBindsTheControlDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("w")
	mustExec(t, e.stranger.conn, `SELECT dataenv.create_workspace($1)`, ws)
	wantDenied(t, "stranger", e.stranger.conn, `SELECT dataenv.add_datatable($1, 'ctl', 'instance', $2)`, ws, e.db)
	for _, sql := range []string{
		`SELECT dataenv.add_datatable($1, 'ctl', 'instance', $2)`,
		`SELECT dataenv.grant_database('instance', $2, current_user) WHERE $1::text IS NOT NULL`,
	} {
		wantErr(t, "admin", e.admin.conn, "is the dataenv control database", sql, ws, e.db)
	}
	e.exec(`SELECT dataenv.add_storage('st', $1)`, "file://"+t.TempDir())
	wantErr(t, "admin", e.admin.conn, "is the dataenv control database", `SELECT dataenv.add_lake($1, 'main', 'instance', $2, 'st', 'l')`, ws, e.db)
	if n := queryInt(t, e.sql, `SELECT (SELECT count(*) FROM dataenv.datatables) + (SELECT count(*) FROM dataenv.lakes) + (SELECT count(*) FROM dataenv.database_grants)`); n != 0 {
		t.Fatalf("%d bindings of the control database", n)
	}
}

// TestNoBindingReachesAnInstallationOrATemplate: what SQL cannot see on another cluster, the
// sidecar checks where the binding is used. An administrator binds (by mistake) a database of the
// external cluster that holds a dataenv installation, and a template: forking copies neither and
// a job attaches neither. On the instance cluster the template is refused at call time.
func TestNoBindingReachesAnInstallationOrATemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	installed := e.parentDB("installed")
	sidecartest.Install(t, external.DSN(installed))
	t.Cleanup(func() { dropSlot(external.DSN(installed)) })
	tpl := e.parentDB("tpl")
	mustExec(t, external.Connect(t, "postgres"), `ALTER DATABASE `+ident(tpl)+` IS_TEMPLATE true`)
	t.Cleanup(func() { _ = sqlErr(external.Connect(t, "postgres"), `ALTER DATABASE `+ident(tpl)+` IS_TEMPLATE false`) })
	ws := wsID("w")
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	for name, db := range map[string]string{"inst": installed, "tpl": tpl} {
		mustExec(t, e.admin.conn, `SELECT dataenv.add_datatable($1, $2, $3, $4)`, ws, name, e.cluster, db)
	}
	e.mustFail(e.request(e.owner.conn, `SELECT dataenv.create_fork($1, $2, '{"inst": "full_copy"}')`, ws, ws+"/a"), "holds a dataenv installation")
	e.mustFail(e.request(e.owner.conn, `SELECT dataenv.create_fork($1, $2, '{"tpl": "schema_only"}')`, ws, ws+"/b"), "is a template")
	e.mustFail(e.request(e.owner.conn, `SELECT dataenv.run($1, 'ATTACH ''datatable://inst'' AS c (READ_ONLY); SELECT * FROM c.dataenv.cluster_secrets')`, ws), "holds a dataenv installation")
	for _, f := range []string{ws + "/a", ws + "/b"} {
		for _, dt := range []string{"inst", "tpl"} {
			if databaseExists(t, names.ForkDatabase(f, dt)) {
				t.Fatalf("a copy of %s was made", dt)
			}
		}
	}
	// A database forked a moment ago and made a template since: the fork's early check may
	// remember it passing, the check on the connection the copy reads it with does not.
	late := e.parentDB("late")
	mustExec(t, e.admin.conn, `SELECT dataenv.add_datatable($1, 'late', $2, $3)`, ws, e.cluster, late)
	e.mustSucceed(e.request(e.owner.conn, `SELECT dataenv.create_fork($1, $2, '{"late": "schema_only"}')`, ws, ws+"/c"))
	mustExec(t, external.Connect(t, "postgres"), `ALTER DATABASE `+ident(late)+` IS_TEMPLATE true`)
	t.Cleanup(func() {
		_ = sqlErr(external.Connect(t, "postgres"), `ALTER DATABASE `+ident(late)+` IS_TEMPLATE false`)
	})
	e.mustFail(e.request(e.owner.conn, `SELECT dataenv.create_fork($1, $2, '{"late": "full_copy"}')`, ws, ws+"/d"), "is a template")
	if databaseExists(t, names.ForkDatabase(ws+"/d", "late")) {
		t.Fatal("a copy of a database made a template was made")
	}
	if n := queryInt(t, e.sql, `SELECT count(*)::int FROM dataenv.workspace_roles WHERE workspace = $1`, ws+"/d"); n != 0 {
		t.Fatalf("the refused fork left %d workspace role records", n)
	}
	local := control.CreateDatabase(t)
	mustExec(t, control.Connect(t, "postgres"), `ALTER DATABASE `+ident(local)+` IS_TEMPLATE true`)
	t.Cleanup(func() {
		_ = sqlErr(control.Connect(t, "postgres"), `ALTER DATABASE `+ident(local)+` IS_TEMPLATE false`)
	})
	wantErr(t, "admin", e.admin.conn, "is a template", `SELECT dataenv.add_datatable($1, 'ltpl', 'instance', $2)`, ws, local)
}

// TestForkCopiesAreNotBindable: a fork copy belongs to the workspace it was made for; nobody
// binds it to another workspace, an administrator included, and it cannot be granted.
func TestForkCopiesAreNotBindable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.victim()
	copyDB := names.ForkDatabase(v.fork, "d")
	ws := wsID("other")
	mustExec(t, e.admin.conn, `SELECT dataenv.create_workspace($1)`, ws)
	for _, sql := range []string{
		`SELECT dataenv.add_datatable($1, 'x', $2, $3)`,
		`SELECT dataenv.grant_database($2, $3, current_user) WHERE $1::text IS NOT NULL`,
	} {
		if err := sqlErr(e.admin.conn, sql, ws, e.cluster, copyDB); err == nil || !(strings.Contains(err.Error(), "reserved prefix") || strings.Contains(err.Error(), "fork copy")) {
			t.Errorf("admin: %s: %v, want the copy refused", sql, err)
		}
	}
	e.exec(`SELECT dataenv.add_storage('st2', $1)`, "file://"+t.TempDir())
	if err := sqlErr(e.admin.conn, `SELECT dataenv.add_lake($1, 'm', $2, $3, 'st2', 'x')`, ws, e.cluster, copyDB); err == nil {
		t.Error("a fork copy was bound as a lake catalog")
	}
}
