package cluster_test

import (
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// TestManagedAdminRoleRulesOfThisVersion: what setup does for a non-superuser CREATEDB CREATEROLE
// admin follows the server's rules (`make test` runs this package on 15, 17 and 18). From 16 on,
// CREATEROLE no longer implies power over other roles: the admin's membership in the
// application role carries INHERIT and SET (granted by the admin itself, which holds ADMIN
// OPTION on roles it created), so it may create databases owned by that role and act as it.
// REPLICATION: never grantable by this admin on 15; on 16+ an admin that has REPLICATION grants
// it to the managed replication role.
func TestManagedAdminRoleRulesOfThisVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A CREATEDB CREATEROLE admin that also has REPLICATION (still no superuser).
	f.adminUser, f.adminPW = external.CreateRole(t, "LOGIN CREATEDB CREATEROLE REPLICATION NOSUPERUSER NOBYPASSRLS")
	f.exec(`SELECT dataenv.update_cluster($1, admin_user => $2, admin_password => $3)`, f.name, f.adminUser, f.adminPW)
	res := f.setup()
	ext := f.ext()
	if external.Major >= 16 {
		// One row per grantor: CREATE ROLE by a CREATEROLE admin leaves an automatic one
		// (ADMIN OPTION, no INHERIT, no SET); setup's own grant must add INHERIT and SET.
		const q = `SELECT coalesce(bool_or(m.inherit_option AND m.set_option), false) FROM pg_auth_members m
			WHERE m.roleid = $1::regrole AND m.member = $2::regrole`
		if !queryBool(t, ext, q, f.appRole, f.adminUser) {
			t.Fatalf("PostgreSQL %d: the admin's membership in %s lacks INHERIT or SET", external.Major, f.appRole)
		}
	} else if !queryBool(t, ext, `SELECT pg_has_role($2, $1, 'USAGE')`, f.appRole, f.adminUser) {
		t.Fatalf("PostgreSQL %d: the admin does not inherit %s", external.Major, f.appRole)
	}
	// As the admin: a database owned by the application role, then acting as that role in it.
	db := f.prefix + "owned"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	if owner := queryString(t, ext, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, db); owner != f.appRole {
		t.Fatalf("database %s owned by %s, want %s", db, owner, f.appRole)
	}
	as := external.ConnectAs(t, f.adminUser, f.adminPW, db)
	mustExec(t, as, `SET ROLE `+ident(f.appRole))
	mustExec(t, as, `CREATE TABLE t (id int)`)

	// The admin has REPLICATION: 16+ lets it grant REPLICATION, 15 does not.
	status := ""
	for _, s := range res.Steps {
		if s.Name == "replication attribute of role "+f.replRole {
			status = s.Status
		}
	}
	got := queryBool(t, ext, `SELECT rolreplication FROM pg_roles WHERE rolname = $1`, f.replRole)
	switch {
	case external.Major >= 16 && (!got || status == cluster.StatusUnavailable):
		t.Fatalf("PostgreSQL %d, admin with REPLICATION: rolreplication=%v, step %q", external.Major, got, status)
	case external.Major < 16 && (got || status != cluster.StatusUnavailable):
		t.Fatalf("PostgreSQL %d, admin with REPLICATION: rolreplication=%v, step %q, want unavailable", external.Major, got, status)
	}
}
