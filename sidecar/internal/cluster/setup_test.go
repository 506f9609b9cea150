package cluster_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

func TestSetupTwiceSecondRunReportsNoChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.setup()
	if !first.Changed || first.SetUpFor != external.Host()+":"+itoa(external.Port()) {
		t.Fatalf("first setup: %+v", first)
	}
	statuses := map[string]string{}
	for _, s := range first.Steps {
		statuses[s.Name] = s.Status
	}
	if statuses["role "+f.appRole] != cluster.StatusCreated || statuses["role "+f.replRole] != cluster.StatusCreated {
		t.Fatalf("first setup steps: %+v", first.Steps)
	}
	// PG15 and a non-superuser admin: REPLICATION cannot be granted, and the report says why.
	if s := statuses["replication attribute of role "+f.replRole]; s != cluster.StatusUnavailable {
		t.Fatalf("replication attribute step %q in %+v", s, first.Steps)
	}

	second := f.setup()
	if second.Changed {
		t.Fatalf("second setup changed something: %+v", second.Steps)
	}
	for _, s := range second.Steps {
		if s.Status != cluster.StatusUnchanged && s.Status != cluster.StatusUnavailable {
			t.Fatalf("second setup step %+v", s)
		}
	}
	ext := f.ext()
	for _, r := range []string{f.appRole, f.replRole} {
		if c := queryString(t, ext, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, r); !cluster.HasMarker(c) {
			t.Fatalf("role %s comment %q", r, c)
		}
	}
	if !queryBool(t, f.sql, `SELECT ready FROM dataenv.cluster_info WHERE name = $1`, f.name) {
		t.Fatal("cluster_info.ready is false after setup")
	}
	// The stored password of the application role works.
	pw := queryString(t, f.sql, `SELECT app_password FROM dataenv.cluster_secrets WHERE cluster = $1`, f.name)
	external.ConnectAs(t, f.appRole, pw, "postgres")
}

func TestSetupRefusesUnmarkedRoleAndLeavesItAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ext := f.ext()
	if _, err := ext.Exec(f.ctx, `CREATE ROLE `+ident(f.appRole)+` LOGIN PASSWORD 'strangers-password'`); err != nil {
		t.Fatal(err)
	}
	_, err, rec := f.run(cluster.KindSetupCluster, map[string]any{"cluster": f.name})
	if err == nil || !request.IsRefused(err) || !strings.Contains(err.Error(), f.appRole) ||
		!strings.Contains(err.Error(), "marker") {
		t.Fatalf("setup with a stranger's role: %v", err)
	}
	if s, ok := rec.find(cluster.StatusRefused); !ok || !strings.Contains(s.Name, f.appRole) {
		t.Fatalf("no refused step: %s", rec)
	}
	if c := queryString(t, ext, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, f.appRole); c != "" {
		t.Fatalf("the stranger's role got comment %q", c)
	}
	external.ConnectAs(t, f.appRole, "strangers-password", "postgres") // password untouched
	if queryBool(t, f.sql, `SELECT ready FROM dataenv.cluster_info WHERE name = $1`, f.name) {
		t.Fatal("a refused setup recorded set_up_for")
	}
}

func TestSetupOfTheInstanceCluster(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	prefix := control.NamePrefix(t)
	app, repl := "dataenv_"+prefix+"app", "dataenv_"+prefix+"repl"
	control.DropRolesAtCleanup(t, app, repl)
	f.exec(`SELECT dataenv.update_cluster('instance', app_role => $1, replication_role => $2)`, app, repl)
	if kind := queryString(t, f.sql, `SELECT kind FROM dataenv.cluster_info WHERE name = 'instance'`); kind != "instance" {
		t.Fatalf("instance cluster kind %q", kind)
	}
	res := f.mustRun(cluster.KindSetupCluster, map[string]any{"cluster": "instance"}).(*cluster.SetupResult)
	if !res.Changed {
		t.Fatalf("instance setup: %+v", res)
	}
	for _, s := range res.Steps {
		if s.Status == cluster.StatusUnavailable {
			t.Fatalf("a superuser admin can grant REPLICATION: %+v", s)
		}
	}
	db := prefix + "db"
	f.mustRun(cluster.KindCreateDatabase, map[string]any{"cluster": "instance", "name": db})
	ctl := control.Connect(t, "postgres")
	if owner := queryString(t, ctl, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, db); owner != app {
		t.Fatalf("owner %q", owner)
	}
	f.mustRun(cluster.KindDropDatabase, map[string]any{"cluster": "instance", "name": db})
}
