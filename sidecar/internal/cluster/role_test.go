package cluster_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

func TestDatatableRoles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()
	role := f.prefix + "reader"
	args := map[string]any{"cluster": f.name, "role": role, "description": "reads the reports"}
	res := f.mustRun(cluster.KindCreateDatatableRole, args).(*cluster.RoleOutcome)
	if res.Status != cluster.StatusCreated {
		t.Fatalf("create: %+v", res)
	}
	if c := queryString(t, ext, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1 AND NOT rolcanlogin`, role); !cluster.HasMarker(c) {
		t.Fatalf("role comment %q", c)
	}
	if !queryBool(t, ext, `SELECT pg_has_role($1, $2, 'MEMBER')`, f.appRole, role) {
		t.Fatal("the application role is not a member of the datatable role")
	}
	if d := queryString(t, f.sql, `SELECT description FROM dataenv.datatable_role_list WHERE cluster = $1 AND role = $2`, f.name, role); d != "reads the reports" {
		t.Fatalf("record description %q", d)
	}
	// Unique per cluster.
	if _, err, _ := f.run(cluster.KindCreateDatatableRole, args); !request.IsRefused(err) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second create: %v", err)
	}
	if err := f.sqlErr(`SELECT dataenv.create_datatable_role($1, $2)`, f.name, role); err == nil {
		t.Fatal("SQL accepted a duplicate datatable role")
	}

	// The same name on the other cluster (the instance cluster).
	cprefix := control.NamePrefix(t)
	app, repl := "dataenv_"+cprefix+"app", "dataenv_"+cprefix+"repl"
	control.DropRolesAtCleanup(t, role, app, repl)
	f.exec(`SELECT dataenv.update_cluster('instance', app_role => $1, replication_role => $2)`, app, repl)
	f.mustRun(cluster.KindSetupCluster, map[string]any{"cluster": "instance"})
	f.mustRun(cluster.KindCreateDatatableRole, map[string]any{"cluster": "instance", "role": role})
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.datatable_roles WHERE role = $1`, role); n != 2 {
		t.Fatalf("%d records of %s", n, role)
	}

	// A role created by hand is neither taken over nor dropped.
	hand := f.prefix + "hand"
	mustExec(t, ext, "CREATE ROLE "+ident(hand))
	if _, err, _ := f.run(cluster.KindCreateDatatableRole, map[string]any{"cluster": f.name, "role": hand}); !request.IsRefused(err) {
		t.Fatalf("create over a hand-made role: %v", err)
	}
	if _, err, _ := f.run(cluster.KindDropDatatableRole, map[string]any{"cluster": f.name, "role": hand}); !request.IsRefused(err) {
		t.Fatalf("drop of a hand-made role: %v", err)
	}

	// A role holding privileges is refused with PostgreSQL's detail, dropped once they are gone.
	mustExec(t, ext, "GRANT CONNECT ON DATABASE postgres TO "+ident(role))
	drop := map[string]any{"cluster": f.name, "role": role}
	if _, err, _ := f.run(cluster.KindDropDatatableRole, drop); !request.IsRefused(err) || !strings.Contains(err.Error(), "privileges") {
		t.Fatalf("drop of a role with privileges: %v", err)
	}
	mustExec(t, ext, "REVOKE CONNECT ON DATABASE postgres FROM "+ident(role))
	if res := f.mustRun(cluster.KindDropDatatableRole, drop).(*cluster.RoleOutcome); res.Status != cluster.StatusDropped {
		t.Fatalf("drop: %+v", res)
	}
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_roles WHERE rolname = $1`, role) != 0 {
		t.Fatal("role still on the external cluster")
	}
	if queryInt(t, control.Connect(t, "postgres"), `SELECT count(*)::int FROM pg_roles WHERE rolname = $1`, role) != 1 {
		t.Fatal("the role of the same name on the instance cluster was dropped")
	}
	if err := f.sqlErr(`SELECT dataenv.drop_datatable_role($1, $2)`, f.name, role); err == nil {
		t.Fatal("SQL accepted the drop of a role that is gone")
	}
	f.mustRun(cluster.KindDropDatatableRole, map[string]any{"cluster": "instance", "role": role})
}
