package forks_test

import (
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestOwnerDefaultsDoNotSteerTheAdmin: a parent whose owner set session defaults for its
// database (another role, read only, a 1 ms statement timeout, ...) is forked by every method
// (dump, TEMPLATE, schema template) as if they were not there: dataenv's sessions pin their own
// settings in the startup packet, which outranks a database's defaults. The fork carries the
// defaults (they are the parent's database settings), is owned by the fork's role, and is
// dropped like any other, although its own defaults now apply to every later session in it.
func TestOwnerDefaultsDoNotSteerTheAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("dflt", 5)
	victim, _ := f.pg.CreateRole(t, "NOLOGIN")
	owner := f.pg.Connect(t, p)
	mustExec(t, owner, `SET ROLE `+ident(f.appRole)) // the parent's owner, no superuser, sets them
	f.pg.HostileDefaults(t, owner, p, victim)
	_ = owner.Close(f.ctx)

	ws := wsID("dflt")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 's', $2, $3)`, ws, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'c', $2, $3)`, ws, f.name, p)

	check := func(t *testing.T, methods map[string]string) {
		fork := wsID("dflt")
		r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"s": "schema_only", "c": "full_copy"}')`, ws, fork))
		role := f.forkRole(fork)
		for dt, method := range methods {
			if res := f.forkResult(r, dt); res.Method != method {
				t.Errorf("%s made by %s, want %s", dt, res.Method, method)
			}
			db := names.ForkDatabase(fork, dt)
			conn := f.pg.ConnectPlain(t, db)
			if n := queryInt(t, conn, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = 'public' AND pg_get_userbyid(c.relowner) <> $1`, role); n != 0 {
				t.Errorf("%s: %d relations not owned by the fork's role %s", db, n, role)
			}
			if dt == "c" {
				if n := queryInt(t, conn, `SELECT count(*) FROM public.customers`); n != 5 {
					t.Errorf("%s: %d customers, want the parent's 5", db, n)
				}
			}
			if n := queryInt(t, conn, `SELECT count(*) FROM pg_db_role_setting s, unnest(s.setconfig) c
				WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = $1) AND s.setrole = 0
				  AND c IN ('role='||$2, 'statement_timeout=1ms', 'default_transaction_read_only=on')`, db, victim); n != 3 {
				t.Errorf("%s: %d of the parent's 3 checked database settings carried, want all", db, n)
			}
			_ = conn.Close(f.ctx)
		}
		f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
		for dt := range methods {
			if db := names.ForkDatabase(fork, dt); databaseExists(t, db) {
				t.Errorf("drop_fork left %s", db)
			}
		}
	}
	t.Run("dump", func(t *testing.T) {
		held := f.pg.ConnectPlain(t, p) // a session on the parent: the full_copy is a dump
		defer held.Close(f.ctx)
		check(t, map[string]string{"s": "dump", "c": "dump"})
	})
	t.Run("template", func(t *testing.T) {
		f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
		check(t, map[string]string{"s": "schema_template", "c": "template"})
	})
}
