package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestForkRoleOwnsCopiesAndIsDropped: every copy of a fork (schema_only from a dump and from the
// schema template, full_copy by TEMPLATE and by dump) and everything in it is owned by the fork's
// own workspace role (../shared/DESIGN.md, "Ownership in fork copies"), never the application
// role; grants the parent holds for another workspace's role are not carried (and are reported);
// drop_fork drops the copies and then the role, so nothing owned by it is left and its drop is
// never blocked; a create_fork that fails leaves no role behind.
func TestForkRoleOwnsCopiesAndIsDropped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("own", 5)
	// What GrantDatatable gives a root workspace's role in its datatable: a role of that prefix
	// with CONNECT and SELECT in the parent.
	otherWS := names.WorkspaceRolePrefix + strings.ReplaceAll(f.prefix, "-", "_") + "other"
	super := external.Connect(t, p)
	mustExec(t, super, `CREATE ROLE `+ident(otherWS)+` LOGIN`)
	t.Cleanup(func() {
		c := external.Connect(t, "postgres")
		_, _ = c.Exec(f.ctx, `DROP OWNED BY `+ident(otherWS))
		_, _ = c.Exec(f.ctx, `DROP ROLE IF EXISTS `+ident(otherWS))
	})
	mustExec(t, super, `GRANT CONNECT ON DATABASE `+ident(p)+` TO `+ident(otherWS)+`;
		GRANT USAGE ON SCHEMA public TO `+ident(otherWS)+`; GRANT SELECT ON public.orders TO `+ident(otherWS))
	_ = super.Close(f.ctx) // the parent is idle again: a full_copy may be a TEMPLATE copy
	ws := wsID("own")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 's', $2, $3)`, ws, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'c', $2, $3)`, ws, f.name, p)
	inst := queryString(t, f.sql, `SELECT id::text FROM dataenv.installation`)

	check := func(t *testing.T, fork string, methods map[string]string) {
		r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"s": "schema_only", "c": "full_copy"}')`, ws, fork))
		role := f.forkRole(fork)
		if want := names.WorkspaceRole(inst, f.name, fork); role != want {
			t.Fatalf("fork %s has role %s, want %s", fork, role, want)
		}
		for dt, method := range methods {
			res := f.forkResult(r, dt)
			if res.Method != method {
				t.Errorf("%s made by %s, want %s", dt, res.Method, method)
			}
			if res.Fidelity.Owner != role {
				t.Errorf("%s: result owner %s, want %s", dt, res.Fidelity.Owner, role)
			}
			left := false
			for _, n := range res.Fidelity.NotCarried {
				left = left || strings.Contains(n.Object, otherWS)
			}
			if !left {
				t.Errorf("%s: the grants to %s are not reported as not carried: %+v", dt, otherWS, res.Fidelity.NotCarried)
			}
			db := names.ForkDatabase(fork, dt)
			conn := external.Connect(t, db)
			if owner := queryString(t, conn, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()`); owner != role {
				t.Errorf("%s: database owned by %s, want %s", db, owner, role)
			}
			if n := queryInt(t, conn, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = 'public' AND pg_get_userbyid(c.relowner) <> $1`, role); n != 0 {
				t.Errorf("%s: %d relations not owned by %s", db, n, role)
			}
			if n := queryInt(t, conn, `SELECT count(*) FROM pg_class c, aclexplode(c.relacl) x
				WHERE x.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1)`, otherWS); n != 0 {
				t.Errorf("%s: %d grants to another workspace's role %s", db, n, otherWS)
			}
			if queryInt(t, conn, `SELECT count(*) FROM pg_database, aclexplode(datacl) x WHERE datname = current_database()
				AND x.grantee = (SELECT oid FROM pg_roles WHERE rolname = $1)`, otherWS) != 0 {
				t.Errorf("%s: the database grants CONNECT to %s", db, otherWS)
			}
			// The fork's role migrates its copy.
			mustExec(t, conn, `SET ROLE `+ident(role)+`; ALTER TABLE public.orders ADD COLUMN note text; INSERT INTO public.customers (email, score) VALUES ('own@x', 1); RESET ROLE`)
			_ = conn.Close(f.ctx)
		}
		f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
		if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspace_roles WHERE workspace = $1`, fork); n != 0 {
			t.Errorf("the role of dropped fork %s is still recorded", fork)
		}
		pg := external.Connect(t, "postgres")
		if n := queryInt(t, pg, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, role); n != 0 {
			t.Errorf("role %s of dropped fork %s is left on the cluster", role, fork)
		}
		_ = pg.Close(f.ctx)
	}
	t.Run("dump", func(t *testing.T) {
		held := external.Connect(t, p) // a session on the parent: the full_copy is a dump
		defer held.Close(f.ctx)
		check(t, wsID("own1"), map[string]string{"s": "dump", "c": "dump"})
	})
	t.Run("template", func(t *testing.T) {
		f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
		check(t, wsID("own2"), map[string]string{"s": "schema_template", "c": "template"})
	})
	t.Run("failed create_fork", func(t *testing.T) {
		held := external.Connect(t, p)
		defer held.Close(f.ctx)
		mustExec(t, held, `SET ROLE `+ident(f.appRole)+`;
			CREATE FUNCTION public.in_parent() RETURNS boolean LANGUAGE sql AS $$ SELECT current_database() = `+quote(p)+` $$;
			ALTER TABLE public.orders ADD CONSTRAINT only_in_parent CHECK (public.in_parent()); RESET ROLE`)
		fork := wsID("own3")
		f.mustFail(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"c": "full_copy"}')`, ws, fork), "only_in_parent")
		if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspace_roles WHERE workspace = $1`, fork); n != 0 {
			t.Errorf("the failed fork %s left its role recorded", fork)
		}
		if n := queryInt(t, held, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, names.WorkspaceRole(inst, f.name, fork)); n != 0 {
			t.Errorf("the failed fork %s left its role on the cluster", fork)
		}
	})
}

// TestDatatableRoleSurvivesAFailedReread: create_datatable_role reads the role back after
// creating it; when that read fails (a server restarting in between, made here by a test hook)
// the request is retried, adopts the role its first attempt made and records it, instead of
// refusing it as changed and leaving an unrecorded role behind.
func TestDatatableRoleSurvivesAFailedReread(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.sidecar.Kill()
	f.sidecar = f.startSidecar("DATAENV_CRASH_AT=cluster.create_datatable_role.fail_reread", "DATAENV_CRASH_MARKER_DIR="+t.TempDir())
	role := f.prefix + "reread"
	r := f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_datatable_role($1, $2)`, f.name, role))
	if !strings.Contains(string(r.result), "adopted") {
		t.Errorf("result %s: want the role adopted by the retry", r.result)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.datatable_roles WHERE cluster = $1 AND role = $2`, f.name, role); n != 1 {
		t.Fatalf("%d records of role %s, want 1", n, role)
	}
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.drop_datatable_role($1, $2)`, f.name, role))
}

// TestFailedForkRetriesAnInterruptedCleanup: a create_fork that fails for good drops what it
// made; when a transient fault stops that cleanup (here a test hook fails the first drop of the
// fork's role), the request is retried rather than ended with the role left behind for a later
// request of the same fork id, which may never come. It still ends failed, with the real error,
// and leaves neither the role nor its record.
func TestFailedForkRetriesAnInterruptedCleanup(t *testing.T) {
	t.Parallel()
	f, a, p, ws := newCrashWorkspace(t, []string{"DATAENV_CRASH_AT=fork.rollback.fail_role_drop", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()})
	held := external.Connect(t, p) // a session on the parent: the full_copy is a dump, which the check refuses
	defer held.Close(f.ctx)
	mustExec(t, held, `SET ROLE `+ident(f.appRole)+`;
		CREATE FUNCTION public.in_parent() RETURNS boolean LANGUAGE sql AS $$ SELECT current_database() = `+quote(p)+` $$;
		ALTER TABLE public.orders ADD CONSTRAINT only_in_parent CHECK (public.in_parent()); RESET ROLE`)
	fork := wsID("rb")
	id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork)
	f.mustFail(id, "only_in_parent")
	if n := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); n < 2 {
		t.Errorf("attempts %d: the interrupted cleanup was not retried", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspace_roles WHERE workspace = $1`, fork); n != 0 {
		t.Errorf("the failed fork %s left its role recorded", fork)
	}
	inst := queryString(t, f.sql, `SELECT id::text FROM dataenv.installation`)
	if n := queryInt(t, held, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, names.WorkspaceRole(inst, f.name, fork)); n != 0 {
		t.Errorf("the failed fork %s left its role on the cluster", fork)
	}
}
