package cluster_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/localpg"
)

// register_cluster makes a check_cluster request of the caller's and returns its id;
// validate => false makes none (a cluster not reachable yet).
func TestRegisterClusterMakesACheckRequest(t *testing.T) {
	f := newFixture(t)
	id := queryString(t, f.sql, `SELECT dataenv.register_cluster($1, 'pg.internal', 5432, 'u', 'p', 'disable')::text`, f.prefix+"later")
	got := queryString(t, f.sql, `SELECT kind || ' ' || (args->>'cluster') || ' ' || requested_by || ' ' || status FROM dataenv.requests WHERE id = $1::uuid`, id)
	if got != "check_cluster "+f.prefix+"later "+control.SuperUser+" pending" {
		t.Fatalf("the check request: %q", got)
	}
	if n := queryString(t, f.sql, `SELECT coalesce(dataenv.register_cluster($1, 'pg.internal', 5432, 'u', 'p', 'disable', validate => false)::text, 'null')`,
		f.prefix+"later2"); n != "null" {
		t.Fatalf("validate => false returned %s", n)
	}
}

// The check connects as the admin and reports what setup will find; it changes nothing.
func TestCheckClusterReports(t *testing.T) {
	f := newFixture(t)
	res := f.mustRun(cluster.KindCheckCluster, map[string]any{"cluster": f.name}).(*cluster.CheckResult)
	if res.AdminUser != f.adminUser || !res.CreateDB || !res.CreateRole || res.Superuser || res.ServerVersion == "" || res.Ready ||
		res.Next != "SELECT dataenv.setup_cluster('"+f.name+"')" {
		t.Fatalf("check: %+v", res)
	}
	if n := queryInt(t, f.ext(), `SELECT count(*)::int FROM pg_roles WHERE rolname = $1`, f.appRole); n != 0 {
		t.Fatal("the check created a role")
	}
}

// A cluster that cannot be reached, a wrong password and an admin without CREATEDB CREATEROLE are
// each refused at once (never retried) with what to change.
func TestCheckClusterSaysWhatToFix(t *testing.T) {
	f := newFixture(t)
	port, err := localpg.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	weak, weakPW := external.CreateRole(t, "LOGIN")
	f.exec(`SELECT dataenv.register_cluster($1, '127.0.0.1', $2, 'u', 'not-the-password', 'disable', validate => false)`, f.prefix+"down", port)
	f.exec(`SELECT dataenv.register_cluster($1, $2, $3, $4, 'not-the-password', 'disable', validate => false)`, f.prefix+"badpw",
		external.Host(), external.Port(), f.adminUser)
	f.exec(`SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable', validate => false)`, f.prefix+"weak",
		external.Host(), external.Port(), weak, weakPW)
	for name, want := range map[string][]string{
		"down":  {"cannot reach cluster", "update_cluster('" + f.prefix + "down', host => ..., port => ...)", "check_cluster('" + f.prefix + "down')"},
		"badpw": {"cannot reach cluster", "admin_password => ..."},
		"weak":  {"lacks CREATEDB and CREATEROLE", "ALTER ROLE", "check_cluster"},
	} {
		_, err, _ := f.run(cluster.KindCheckCluster, map[string]any{"cluster": f.prefix + name})
		if !request.IsRefused(err) {
			t.Fatalf("%s: %v, want a refusal", name, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nlacks %q", name, err, w)
			}
		}
		if strings.Contains(err.Error(), "not-the-password") || strings.Contains(err.Error(), weakPW) {
			t.Fatalf("%s: the error shows a password: %v", name, err)
		}
	}
}

// remove_cluster says, in dataenv's words, what still names the cluster (a datatable here),
// instead of a foreign-key violation; a non-administrator is told which role it needs.
func TestRemoveClusterNamesItsUses(t *testing.T) {
	f := newFixture(t)
	f.exec(`SELECT dataenv.create_workspace($1)`, f.prefix+"ws")
	f.exec(`SELECT dataenv.add_datatable($1, 'crm', $2, 'crm_db')`, f.prefix+"ws", f.name)
	err := f.sqlErr(`SELECT dataenv.remove_cluster($1)`, f.name)
	if err == nil || !strings.Contains(err.Error(), "is still in use by: datatable crm of workspace "+f.prefix+"ws") {
		t.Fatalf("remove_cluster with a datatable left: %v", err)
	}
	f.exec(`SELECT dataenv.remove_datatable($1, 'crm')`, f.prefix+"ws")
	f.exec(`SELECT dataenv.remove_cluster($1)`, f.name)
}
