package forks_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestForkCarriesWhatItCanAndSaysWhy: a parent with what only a superuser may create or set (an
// event trigger, a FOR ALL TABLES publication, an untrusted extension, a superuser-only database
// setting, the role setting of a superuser that owns nothing) and objects of the superuser, plus
// default privileges of a role nobody is a member of. Both modes succeed; the result lists exactly what was not carried
// and why; everything else matches the parent with the superuser's and the stranger's objects and
// default privileges owned by the fork's owner. The event trigger keeps full_copy off TEMPLATE.
func TestForkCarriesWhatItCanAndSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("lim", 3)
	stranger, _ := external.CreateRole(t, "NOLOGIN")
	super, _ := external.CreateRole(t, "NOLOGIN SUPERUSER") // owns nothing: its role setting is not the owner's
	conn := external.Connect(t, p)
	mustExec(t, conn, `
		CREATE FUNCTION public.su_fn() RETURNS int LANGUAGE sql AS 'SELECT 1';
		CREATE FUNCTION public.evt() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$;
		CREATE EVENT TRIGGER audit_ddl ON ddl_command_end EXECUTE FUNCTION public.evt();
		CREATE PUBLICATION everything FOR ALL TABLES;
		COMMENT ON PUBLICATION everything IS 'every table';
		CREATE EXTENSION postgres_fdw;
		ALTER DEFAULT PRIVILEGES FOR ROLE `+ident(stranger)+` GRANT SELECT ON TABLES TO PUBLIC;
		ALTER DATABASE `+ident(p)+` SET log_min_duration_statement = '1s';
		ALTER ROLE `+ident(super)+` IN DATABASE `+ident(p)+` SET work_mem = '4MB';`)
	_ = conn.Close(f.ctx) // nobody is connected: what keeps full_copy off TEMPLATE is the event trigger
	ws := wsID("lim")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'shop', $2, $3)`, ws, f.name, p)
	parent := readCatalog(t, p)
	wantLeft := []string{"event trigger audit_ddl", "publication everything", "extension postgres_fdw",
		"database setting log_min_duration_statement=1s", "setting work_mem=4MB of role " + super}
	notCarried := []string{"audit_ddl", "EXECUTE FUNCTION public.evt()", "everything", "postgres_fdw", "log_min_duration_statement", "work_mem=4MB"}

	for _, mode := range []string{"schema_only", "full_copy"} {
		t.Run(mode, func(t *testing.T) {
			fork := wsID("lim")
			r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, jsonb_build_object('shop', $3::text))`, ws, fork, mode))
			res := f.forkResult(r, "shop")
			if res.Fidelity.Template.Request != "" { // its build reads the parent: done before the next fork
				f.mustSucceed(res.Fidelity.Template.Request)
			}
			if res.Method != "dump" {
				t.Errorf("%s made by %s, want dump", mode, res.Method)
			}
			if mode == "full_copy" && !strings.Contains(res.Fidelity.MethodReason, "event trigger") {
				t.Errorf("method reason %q does not name the event trigger", res.Fidelity.MethodReason)
			}
			var got []string
			for _, n := range res.Fidelity.NotCarried {
				got = append(got, n.Object)
				if n.Reason == "" {
					t.Errorf("%s: no reason", n.Object)
				}
			}
			for _, w := range wantLeft {
				if !slices.Contains(got, w) {
					t.Errorf("result does not list %q as not carried: %v", w, got)
				}
			}
			if len(got) != len(wantLeft) {
				t.Errorf("not carried %v, want exactly %v", got, wantLeft)
			}
			for _, d := range compareFork(parent, readCatalog(t, names.ForkDatabase(fork, "shop")),
				expectation{owner: f.forkRole(fork), withData: mode == "full_copy"}) {
				if !containsAny(d, notCarried) {
					t.Error(d)
				}
			}
			f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// TestRestoreNeverRunsParentCodeAsTheAdmin: code of the parent's owner that a restore runs (a
// CHECK constraint's function, while rows load) and that resets its role runs as the fork's
// owner, which is who connected: never as the cluster's admin.
func TestRestoreNeverRunsParentCodeAsTheAdmin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("spy", 3)
	conn := external.Connect(t, p)
	mustExec(t, conn, `SET ROLE `+ident(f.appRole)+`;
		CREATE TABLE public.a_spylog (session_role text, acting_role text);
		CREATE FUNCTION public.spy(x bigint) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
		    RESET ROLE;
		    INSERT INTO public.a_spylog VALUES (session_user, current_user);
		    RETURN true;
		END $$;
		ALTER TABLE public.customers ADD CONSTRAINT spied CHECK (public.spy(id));
		RESET ROLE;
		TRUNCATE public.a_spylog;`)
	ws := wsID("spy")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'shop', $2, $3)`, ws, f.name, p)
	fork := wsID("spy")
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"shop": "full_copy"}')`, ws, fork)) // p is in use: dump
	fc := external.Connect(t, names.ForkDatabase(fork, "shop"))
	roles := queryString(t, fc, `SELECT string_agg(DISTINCT session_role || '/' || acting_role, ',') FROM public.a_spylog`)
	if owner := f.forkRole(fork); roles != owner+"/"+owner {
		t.Fatalf("the restore ran the parent's CHECK function as %q, want only the fork's role %s", roles, owner)
	}
}

// TestForkFailureLeadsWithTheError: a restore that fails (a CHECK constraint that holds in the
// parent and not in a copy) fails the fork with PostgreSQL's error and the object, not the
// restore's progress log, and leaves nothing behind.
func TestForkFailureLeadsWithTheError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("err", 3)
	conn := external.Connect(t, p)
	mustExec(t, conn, `SET ROLE `+ident(f.appRole)+`;
		CREATE FUNCTION public.in_parent() RETURNS boolean LANGUAGE sql AS $$ SELECT current_database() = `+quote(p)+` $$;
		ALTER TABLE public.orders ADD CONSTRAINT only_in_parent CHECK (public.in_parent());`)
	ws := wsID("err")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'shop', $2, $3)`, ws, f.name, p)
	fork := wsID("err")
	r := f.mustFail(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"shop": "full_copy"}')`, ws, fork), "only_in_parent")
	for _, want := range []string{"violates check constraint", "orders", "TABLE DATA"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("error %q does not say %q", r.err, want)
		}
	}
	if strings.Contains(r.err, "creating ") || strings.Contains(r.err, "processing data") || len(r.err) > 2500 {
		t.Errorf("error carries the restore's progress log (%d bytes): %s", len(r.err), r.err)
	}
	if databaseExists(t, names.ForkDatabase(fork, "shop")) {
		t.Error("the failed fork's copy is left")
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
