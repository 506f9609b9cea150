package cluster_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// workspace creates workspace id in the fixture's control database and returns the name of its
// role on the external cluster (dropped at cleanup).
func (f *fixture) workspace(id string) string {
	f.t.Helper()
	f.exec(`SELECT dataenv.create_workspace($1)`, id)
	inst := queryString(f.t, f.sql, `SELECT id::text FROM dataenv.installation`)
	role := names.WorkspaceRole(inst, f.name, id)
	external.DropRolesAtCleanup(f.t, role)
	return role
}

func (f *fixture) ensureRole(ws string) (*cluster.WorkspaceRole, error) {
	return f.admin.EnsureWorkspaceRole(f.ctx, f.name, ws)
}

// A workspace role is created once, with the marker, LOGIN and nothing else, its OID recorded and
// its password in the secrets table; the non-superuser admin is a member of it; jobs connect as
// it with search_path pinned. A second call changes nothing.
func TestWorkspaceRoleConverges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	name := f.workspace("prod")
	role, err := f.ensureRole("prod")
	if err != nil {
		t.Fatal(err)
	}
	if role.Name != name || role.OID == 0 {
		t.Fatalf("role %+v, want name %s", role, name)
	}
	ext := f.ext()
	got := queryString(t, ext, `SELECT concat_ws(' ', rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls,
		oid, shobj_description(oid, 'pg_authid')) FROM pg_roles WHERE rolname = $1`, name)
	if !strings.HasPrefix(got, "t f f f f f ") || !strings.Contains(got, names.Marker+"; workspace role; installation ") ||
		!strings.Contains(got, "workspace prod") || !strings.Contains(got, itoa(int(role.OID))) {
		t.Fatalf("role on the cluster: %s", got)
	}
	if rec := queryString(t, f.sql, `SELECT role || ' ' || role_oid FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = 'prod'`, f.name); rec != name+" "+itoa(int(role.OID)) {
		t.Fatalf("record %q", rec)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspace_role_secrets WHERE password IS NOT NULL AND password_pending IS NULL`); n != 1 {
		t.Fatalf("settled passwords: %d", n)
	}
	if !queryBool(t, ext, `SELECT pg_has_role($1, $2, 'USAGE')`, f.adminUser, name) {
		t.Fatal("the admin is not a member of the workspace role")
	}
	conn, err := f.admin.ConnectWorkspace(f.ctx, f.name, "prod", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(f.ctx)
	if got := queryString(t, conn, `SELECT current_user || ' ' || current_setting('search_path')`); got != name+" pg_catalog, pg_temp" {
		t.Fatalf("connected as %s", got)
	}
	again, err := f.ensureRole("prod")
	if err != nil || again.OID != role.OID {
		t.Fatalf("second ensure: %+v %v", again, err)
	}
	// The secrets are the sidecar's alone.
	for _, tbl := range []string{"dataenv.workspace_role_secrets", "dataenv.workspace_roles"} {
		for _, r := range []string{"dataenv_user", "dataenv_admin"} {
			if queryBool(t, f.sql, `SELECT has_table_privilege($1, $2, 'SELECT')`, r, tbl) {
				t.Errorf("%s may read %s", r, tbl)
			}
		}
	}
}

// A role of that name dataenv did not create (no marker), or one that replaced dataenv's (same
// marker, another OID), is refused and left untouched. Attributes someone added are taken back.
func TestWorkspaceRoleRefusesWhatItDidNotCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ext := f.ext()
	name := f.workspace("prod")
	mustExec(t, ext, "CREATE ROLE "+ident(name)+" LOGIN PASSWORD 'theirs'")
	if _, err := f.ensureRole("prod"); !request.IsRefused(err) || !strings.Contains(err.Error(), "without the marker") {
		t.Fatalf("ensure over a foreign role: %v", err)
	}
	if c := queryString(t, ext, `SELECT coalesce(shobj_description(oid, 'pg_authid'), '') FROM pg_roles WHERE rolname = $1`, name); c != "" {
		t.Fatalf("the foreign role was touched: comment %q", c)
	}
	mustExec(t, ext, "DROP ROLE "+ident(name))
	role, err := f.ensureRole("prod")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, ext, "ALTER ROLE "+ident(name)+" CREATEDB NOLOGIN")
	f.admin.ForgetWorkspaceRoles()
	if _, err := f.ensureRole("prod"); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, ext, `SELECT rolcanlogin || ' ' || rolcreatedb FROM pg_roles WHERE rolname = $1`, name); got != "true false" {
		t.Fatalf("attributes after converging: %s", got)
	}
	// Replaced by a look-alike: same name and comment, another OID.
	comment := queryString(t, ext, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, name)
	mustExec(t, ext, "DROP OWNED BY "+ident(name)+"; DROP ROLE "+ident(name))
	mustExec(t, ext, "CREATE ROLE "+ident(name)+" LOGIN; COMMENT ON ROLE "+ident(name)+" IS "+literal(comment))
	f.admin.ForgetWorkspaceRoles()
	if _, err := f.ensureRole("prod"); !request.IsRefused(err) || !strings.Contains(err.Error(), "recorded OID "+itoa(int(role.OID))) {
		t.Fatalf("ensure over a look-alike: %v", err)
	}
	f.exec(`DELETE FROM dataenv.workspaces WHERE id = 'prod'`)
	if err := f.dropRoles("prod"); !request.IsRefused(err) || !strings.Contains(err.Error(), "OID") {
		t.Fatalf("drop of a look-alike: %v", err)
	}
	if !queryBool(t, ext, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, name) {
		t.Fatal("the look-alike was dropped")
	}
}

func (f *fixture) dropRoles(ws string) error {
	f.admin.ForgetWorkspaceRoles()
	return f.admin.DropWorkspaceRoles(f.ctx, ws, nil)
}

// A datatable gives the workspace role CONNECT and what the application role may do in the
// database (directly or through a datatable role whose privileges the admin may pass on), DML
// only: never CREATE in a schema, never an object the application role cannot reach; what the
// application role loses, the workspace role does not keep.
func TestGrantDatatableMirrorsTheApplicationRole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	db := f.prefix + "crm"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	f.mustRun(cluster.KindCreateDatatableRole, map[string]any{"cluster": f.name, "role": f.prefix + "reader"})
	name := f.workspace("prod")
	super := external.Connect(t, db)
	other, _ := external.CreateRole(t, "NOLOGIN")
	mustExec(t, super, "SET ROLE "+ident(f.appRole)+"; CREATE TABLE public.customers (id int); INSERT INTO customers VALUES (1); RESET ROLE")
	mustExec(t, super, "CREATE SCHEMA private AUTHORIZATION "+ident(other)+"; SET ROLE "+ident(other)+
		"; CREATE TABLE private.shared (v text); CREATE TABLE private.hidden (v text); GRANT USAGE ON SCHEMA private TO "+
		ident(f.prefix+"reader")+" WITH GRANT OPTION; GRANT SELECT ON private.shared TO "+ident(f.prefix+"reader")+" WITH GRANT OPTION; RESET ROLE")
	if err := f.admin.GrantDatatable(f.ctx, f.name, "prod", db); err != nil {
		t.Fatal(err)
	}
	ws := f.connectWorkspace("prod", db)
	mustExec(t, ws, "INSERT INTO public.customers VALUES (2)")
	if n := queryInt(t, ws, "SELECT count(*) FROM public.customers"); n != 2 {
		t.Fatalf("rows %d", n)
	}
	mustExec(t, ws, "SELECT * FROM private.shared")
	for sql, want := range map[string]string{
		"SELECT * FROM private.hidden":            "permission denied",
		"INSERT INTO private.shared VALUES ('x')": "permission denied",
		"CREATE TABLE public.mine (x int)":        "permission denied",
		"DROP TABLE public.customers":             "must be owner",
		"CREATE TRIGGER t BEFORE INSERT ON public.customers FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()": "permission denied",
	} {
		if _, err := ws.Exec(f.ctx, sql); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s as the workspace role: %v; want %q", sql, err, want)
		}
	}
	if got := queryString(t, f.sql, `SELECT array_to_string(databases, ',') FROM dataenv.workspace_role_list WHERE workspace = 'prod'`); got != db {
		t.Fatalf("recorded databases %q", got)
	}
	// The datatable role loses SELECT on shared: so does the workspace role, and the next grant
	// does not give it back.
	mustExec(t, super, "SET ROLE "+ident(other)+"; REVOKE SELECT ON private.shared FROM "+ident(f.prefix+"reader")+" CASCADE; RESET ROLE")
	if err := f.admin.GrantDatatable(f.ctx, f.name, "prod", db); err != nil {
		t.Fatal(err)
	}
	if queryBool(t, super, `SELECT has_table_privilege($1, 'private.shared', 'SELECT')`, name) {
		t.Fatal("the workspace role kept a privilege the application role lost")
	}
	// A second grant with nothing to do changes nothing.
	if err := f.admin.GrantDatatable(f.ctx, f.name, "prod", db); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) connectWorkspace(ws, db string) *pgx.Conn {
	f.t.Helper()
	conn, err := f.admin.ConnectWorkspace(f.ctx, f.name, ws, db)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Dropping a workspace's roles: refused while the workspace lives; once it is gone, what the
// role created is handed to the admin, its privileges revoked, the role and its records
// dropped. A workspace created again under the same id gets a new role, without the old grants.
func TestDropWorkspaceRoleAndRecreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	db := f.prefix + "cat"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	name := f.workspace("prod")
	if err := f.admin.GrantDatatable(f.ctx, f.name, "prod", db); err != nil {
		t.Fatal(err)
	}
	super := external.Connect(t, db)
	mustExec(t, super, "GRANT CREATE ON SCHEMA public TO "+ident(name))
	ws := f.connectWorkspace("prod", db)
	mustExec(t, ws, "CREATE TABLE public.made_by_job (x int)")
	ws.Close(f.ctx)
	old, _ := f.ensureRole("prod")

	if err := f.dropRoles("prod"); err != nil {
		t.Fatal(err)
	}
	if !queryBool(t, f.ext(), `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, name) {
		t.Fatal("the role of a live workspace was dropped")
	}
	// The workspace is dropped and created again: its next role is a new one.
	f.exec(`DELETE FROM dataenv.workspaces WHERE id = 'prod'`)
	f.exec(`SELECT dataenv.create_workspace('prod')`)
	f.admin.ForgetWorkspaceRoles()
	role, err := f.ensureRole("prod")
	if err != nil {
		t.Fatal(err)
	}
	if role.OID == old.OID {
		t.Fatal("the new workspace got the old role")
	}
	if owner := queryString(t, super, `SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'made_by_job'`); owner != f.adminUser {
		t.Fatalf("a table the old role created is owned by %s, want the admin %s", owner, f.adminUser)
	}
	if queryBool(t, super, `SELECT has_schema_privilege($1, 'public', 'CREATE')`, name) {
		t.Fatal("the new role inherited a grant of the old one")
	}
	// Once the workspace is gone for good, its role goes too.
	f.exec(`DELETE FROM dataenv.workspaces WHERE id = 'prod'`)
	if err := f.dropRoles("prod"); err != nil {
		t.Fatal(err)
	}
	if queryBool(t, f.ext(), `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, name) {
		t.Fatal("the role is still there")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspace_roles`); n != 0 {
		t.Fatalf("records left: %d", n)
	}
}

// A drop of a workspace role that stopped between DROP ROLE and removing the role's record (a
// kill, a terminated session) leaves a record whose OID names no role: the next EnsureWorkspaceRole
// makes the role again and records its OID, instead of refusing its own role from then on.
func TestWorkspaceRoleAfterAnInterruptedDrop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	name := f.workspace("prod")
	old, err := f.ensureRole("prod")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, f.ext(), "DROP ROLE "+ident(name))
	f.admin.ForgetWorkspaceRoles()
	role, err := f.ensureRole("prod")
	if err != nil {
		t.Fatalf("ensure after the role was dropped under its record: %v", err)
	}
	if role.OID == old.OID {
		t.Fatal("the OID did not change")
	}
	if rec := queryInt(t, f.sql, `SELECT role_oid::bigint FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = 'prod'`, f.name); rec != int(role.OID) {
		t.Fatalf("recorded OID %d, the role has %d", rec, role.OID)
	}
	f.admin.ForgetWorkspaceRoles()
	if again, err := f.ensureRole("prod"); err != nil || again.OID != role.OID {
		t.Fatalf("ensure once more: %+v %v", again, err)
	}
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// RotateWorkspacePassword gives the role a new password (the old one is refused by the server),
// keeps the role (same OID), and connections made afterwards use the new one; a workspace
// without a role is refused.
func TestRotateWorkspacePassword(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	name := f.workspace("prod")
	role, err := f.ensureRole("prod")
	if err != nil {
		t.Fatal(err)
	}
	old := queryString(t, f.sql, `SELECT password FROM dataenv.workspace_role_secrets WHERE cluster = $1 AND workspace = 'prod'`, f.name)
	rotated, err := f.admin.RotateWorkspacePassword(f.ctx, f.name, "prod", nil)
	if err != nil || rotated.OID != role.OID || rotated.Name != name {
		t.Fatalf("rotate: %+v %v", rotated, err)
	}
	cur := queryString(t, f.sql, `SELECT password || ' ' || (password_pending IS NULL) FROM dataenv.workspace_role_secrets WHERE cluster = $1 AND workspace = 'prod'`, f.name)
	if strings.HasPrefix(cur, old) || !strings.HasSuffix(cur, " true") {
		t.Fatalf("password after rotation: settled %q (old %d chars)", cur, len(old))
	}
	if _, err := pgx.Connect(f.ctx, external.DSNAs(name, old, "postgres")); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("the old password after rotation: %v", err)
	}
	conn, err := f.admin.ConnectWorkspace(f.ctx, f.name, "prod", "postgres")
	if err != nil {
		t.Fatalf("connect after rotation: %v", err)
	}
	conn.Close(f.ctx)
	f.exec(`SELECT dataenv.create_workspace('empty')`)
	if _, err := f.admin.RotateWorkspacePassword(f.ctx, f.name, "empty", nil); !request.IsRefused(err) {
		t.Fatalf("rotating a workspace without a role: %v", err)
	}
}
