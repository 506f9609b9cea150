package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestForkOfAParentWithUntrustedExtensions: a parent whose tables use extensions only a superuser
// may create (PostGIS is the common case; here contrib's bloom, an index access method, and
// earthdistance, a type, which requires the trusted cube), installed by a superuser in a schema
// of the application's, on a cluster whose admin is a superuser. A restore run as the fork's
// owner cannot create them, so before the admin made them in the copy, every schema_only fork and
// every full_copy of a parent in use failed on the first table that used them. Now every mode
// and method carries them: the fork has the parent's schema, rows (full_copy) and privileges,
// its owner uses the extensions, and the result says the extensions belong to the admin.
func TestForkOfAParentWithUntrustedExtensions(t *testing.T) {
	t.Parallel()
	reader, _ := external.CreateRole(t, "NOLOGIN") // dropped after the fixture's spares (granted things there)
	f := newSuperuserFixture(t)
	a := f.newUser()
	p := untrustedParent(f, reader)
	ws := wsID("ext")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'app', $2, $3)`, ws, f.name, p)
	parent := readCatalog(t, p)
	made := []string{"extension cube", "extension earthdistance", "extension bloom", "extension pg_stat_statements",
		"extension postgres_fdw"}
	check := func(t *testing.T, mode, wantMethod string) {
		fork := wsID("ex")
		r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, jsonb_build_object('app', $3::text))`, ws, fork, mode))
		res := f.forkResult(r, "app")
		if res.Method != wantMethod {
			t.Errorf("%s fork made by %q, want %q", mode, res.Method, wantMethod)
		}
		if res.Fidelity.Template.Request != "" && res.Fidelity.Template.Status == "building" {
			f.mustSucceed(res.Fidelity.Template.Request)
		}
		for _, want := range made {
			if !reportsMadeByAdmin(res, want) {
				t.Errorf("result does not say the admin made %s: %+v", want, res.Fidelity.NotCarried)
			}
		}
		owner := f.forkRole(fork)
		db := names.ForkDatabase(fork, "app")
		for _, d := range compareFork(parent, readCatalog(t, db), expectation{owner: owner, withData: mode == "full_copy"}) {
			if !reportedExtensionOwner(d, res) {
				t.Error(d)
			}
		}
		fc := external.Connect(t, db)
		defer fc.Close(f.ctx)
		mustExec(t, fc, `SET ROLE `+ident(owner)+`;
			INSERT INTO places VALUES (100, 'new', geo.ll_to_earth(10, 10));
			ALTER TABLE geo.regions ADD COLUMN note text;
			CREATE INDEX places_bloom2 ON places USING bloom (id)`)
		want := 21
		if mode == "schema_only" {
			want = 1
		}
		// earth_distance is revoked from PUBLIC and granted to reader: the owner may not call it
		// (nor could the application role in the parent), reader may.
		if _, err := fc.Exec(f.ctx, `SELECT geo.earth_distance(loc, loc) FROM places`); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("the fork's owner calls geo.earth_distance, which the parent revoked from PUBLIC: %v", err)
		}
		mustExec(t, fc, `RESET ROLE; SET ROLE `+ident(reader))
		if n := queryInt(t, fc, `SELECT count(*) FROM places WHERE geo.earth_distance(loc, geo.ll_to_earth(0, 0)) >= 0`); n != want {
			t.Errorf("the fork's places: %d rows, want %d", n, want)
		}
		f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
	}
	t.Run("schema_only/dump", func(t *testing.T) { check(t, "schema_only", "dump") })
	t.Run("schema_only/schema_template", func(t *testing.T) { check(t, "schema_only", "schema_template") })
	t.Run("full_copy/template", func(t *testing.T) {
		// The extensions keep their owner, the parent's superuser; its other objects are the
		// fork's owner's.
		waitIdle(t, external.Connect(t, "postgres"), p)
		fork := wsID("ext")
		r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, jsonb_build_object('app', $3::text))`, ws, fork, "full_copy"))
		res := f.forkResult(r, "app")
		if res.Method != "template" {
			t.Errorf("full_copy of the idle parent made by %q, want template", res.Method)
		}
		db := names.ForkDatabase(fork, "app")
		for _, d := range compareFork(parent, readCatalog(t, db), expectation{owner: f.forkRole(fork), withData: true}) {
			if !reportedExtensionOwner(d, res) {
				t.Error(d)
			}
		}
		f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
	})
	t.Run("full_copy/dump", func(t *testing.T) {
		held := external.Connect(t, p) // a session on the parent: the copy is a dump
		defer held.Close(f.ctx)
		check(t, "full_copy", "dump")
	})
	// The schema template (refusing connections) holds objects of the admin and grants to
	// reader: it goes with the datatable entry, before the test's roles are dropped.
	mustExec(t, a.conn, `SELECT dataenv.remove_datatable($1, 'app')`, ws)
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
}

// reportsMadeByAdmin: the result lists ext as made by the cluster's admin, or (a TEMPLATE copy
// of the schema template, which the admin made the same way) as keeping the template's owner.
func reportsMadeByAdmin(res forkFidelity, ext string) bool {
	for _, n := range res.Fidelity.NotCarried {
		if n.Object == ext && strings.Contains(n.Reason, "made by the cluster's admin") {
			return true
		}
	}
	return false
}

// untrustedParent is a parent database whose tables use extensions only a superuser may create,
// made by the cluster's superuser in a schema of the application role's (as a DBA installs
// them), with things granted to reader.
func untrustedParent(f *fixture, reader string) string {
	t := f.t
	t.Helper()
	p := f.parentDB("ext", 3)
	conn := external.Connect(t, p)
	mustExec(t, conn, `
		CREATE SCHEMA geo AUTHORIZATION `+ident(f.appRole)+`;
		COMMENT ON SCHEMA geo IS 'spatial helpers';
		GRANT USAGE ON SCHEMA geo TO PUBLIC;
		CREATE EXTENSION cube SCHEMA geo;
		CREATE EXTENSION earthdistance SCHEMA geo;
		COMMENT ON EXTENSION earthdistance IS 'distances on the earth';
		CREATE EXTENSION bloom;
		CREATE EXTENSION pg_stat_statements; -- its script revokes a function from PUBLIC
		GRANT EXECUTE ON FUNCTION geo.earth_distance(geo.earth, geo.earth) TO `+ident(reader)+`;
		REVOKE EXECUTE ON FUNCTION geo.earth_distance(geo.earth, geo.earth) FROM PUBLIC;
		GRANT SELECT ON pg_stat_statements TO `+ident(reader)+`;
		CREATE EXTENSION postgres_fdw; -- the application role may make servers of its wrapper
		GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO `+ident(f.appRole)+`;
		CREATE SCHEMA admin_tools;  -- objects of the superuser: the fork's owner owns them, whatever the method
		CREATE FUNCTION admin_tools.su_fn() RETURNS int LANGUAGE sql AS 'SELECT 1';
		CREATE TABLE public.su_table (id int);
		ALTER DATABASE `+ident(p)+` SET search_path = public, geo; -- earthdistance's functions look for cube there
		SET search_path = public, geo;
		SET ROLE `+ident(f.appRole)+`;
		CREATE TABLE places (id int PRIMARY KEY, name text NOT NULL, loc geo.earth NOT NULL);
		CREATE INDEX places_bloom ON places USING bloom (id, name);
		CREATE TABLE geo.regions (id int PRIMARY KEY, centre geo.earth);
		INSERT INTO places SELECT g, 'p' || g, geo.ll_to_earth(g, g) FROM generate_series(1, 20) g;
		INSERT INTO geo.regions VALUES (1, geo.ll_to_earth(0, 0));
		GRANT SELECT ON places TO `+ident(reader)+`;
		CREATE SERVER elsewhere FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', dbname 'elsewhere');
		CREATE USER MAPPING FOR CURRENT_USER SERVER elsewhere OPTIONS (user 'someone', password 'secret');
		CREATE FOREIGN TABLE far_things (id int) SERVER elsewhere OPTIONS (table_name 'things');
		CREATE VIEW far_places AS SELECT id FROM places WHERE geo.earth_distance(loc, geo.ll_to_earth(0, 0)) > 1e6;
		RESET ROLE;`)
	_ = conn.Close(f.ctx)
	return p
}

// TestCrashWhileTheAdminPreparesACopy kills the sidecar (SIGKILL) once the admin has made a
// schema_only copy's untrusted extensions, before the copy is given to the fork's role: the
// staging database is then still the admin's and closed to PUBLIC (nothing of another role's
// can be in it), and after a restart the request finishes once, with the parent's schema and no
// staging database left.
func TestCrashWhileTheAdminPreparesACopy(t *testing.T) {
	t.Parallel()
	env := []string{"DATAENV_CRASH_AT=cluster.create_database.after_prepare", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	reader, _ := external.CreateRole(t, "NOLOGIN") // dropped after the fixture's spares (granted things there)
	f := newSuperuserFixture(t, env...)
	a := f.newUser()
	p := untrustedParent(f, reader)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)
	waitExit(t, f.sidecar)

	ext := external.Connect(t, "postgres")
	staging := "dataenv_tmp_" + strings.ReplaceAll(id, "-", "")
	var owner string
	var publicConnects bool
	if err := ext.QueryRow(f.ctx, `SELECT pg_get_userbyid(datdba), has_database_privilege('public', datname, 'CONNECT')
		FROM pg_database WHERE datname = $1`, staging).Scan(&owner, &publicConnects); err != nil {
		t.Fatalf("the prepared staging database %s: %v", staging, err)
	}
	if owner != f.adminUser || publicConnects {
		t.Fatalf("the prepared staging database is owned by %s (want the admin %s), PUBLIC may connect: %v", owner, f.adminUser, publicConnects)
	}
	f.sidecar = f.startSidecar(env...) // the marker keeps it from dying twice
	res := f.forkResult(f.mustSucceed(id), "d")
	if res.Fidelity.Template.Request != "" { // its build, done before the datatable is removed
		f.mustSucceed(res.Fidelity.Template.Request)
	}
	copyDB := names.ForkDatabase(fork, "d")
	if s, ps := schemaOf(t, copyDB), schemaOf(t, p); s != ps {
		t.Fatalf("after the crash the copy's schema differs:\n%s\n---\n%s", s, ps)
	}
	if databaseExists(t, staging) {
		t.Fatalf("staging database %s is left", staging)
	}
	if a := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); a < 2 {
		t.Fatalf("attempts %d: the crash did not happen inside the handler", a)
	}
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
	mustExec(t, a.conn, `SELECT dataenv.remove_datatable($1, 'd')`, ws)
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
}

// TestForkKeepsAnExtensionsConfiguration: pg_partman (only a superuser may create it) keeps its
// partition sets in configuration tables, whose rows a dump carries. In a full_copy by dump the
// admin makes the extension, so the rows cannot be restored by the fork's owner: the admin
// copies them, and partman in the fork manages the fork's partitions. A schema_only fork has none
// (they are rows). Needs the Debian package postgresql-<major>-partman (make deps installs it).
func TestForkKeepsAnExtensionsConfiguration(t *testing.T) {
	t.Parallel()
	f := newSuperuserFixture(t)
	a := f.newUser()
	p := f.parentDB("pm", 3)
	conn := external.Connect(t, p)
	mustExec(t, conn, `
		CREATE SCHEMA partman;
		CREATE EXTENSION pg_partman SCHEMA partman;
		SET ROLE `+ident(f.appRole)+`;
		CREATE TABLE public.events (id bigint NOT NULL, created_at timestamptz NOT NULL) PARTITION BY RANGE (created_at);
		RESET ROLE;
		SELECT partman.create_parent('public.events', 'created_at', 'native', 'daily', p_premake := 2);
		INSERT INTO public.events SELECT g, now() FROM generate_series(1, 5) g;`)
	ws := wsID("pm")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'app', $2, $3)`, ws, f.name, p)
	const sets = `SELECT count(*) FROM partman.part_config WHERE parent_table = 'public.events'`
	if n := queryInt(t, conn, sets); n != 1 {
		t.Fatalf("the parent has %d partition sets, want 1", n)
	}
	for _, mode := range []string{"full_copy", "schema_only"} {
		t.Run(mode, func(t *testing.T) {
			fork := wsID("pm")
			r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, jsonb_build_object('app', $3::text))`, ws, fork, mode))
			res := f.forkResult(r, "app")
			if res.Method != "dump" { // conn is still connected to the parent
				t.Errorf("%s made by %q, want dump", mode, res.Method)
			}
			if res.Fidelity.Template.Request != "" && res.Fidelity.Template.Status == "building" {
				f.mustSucceed(res.Fidelity.Template.Request)
			}
			for _, n := range res.Fidelity.NotCarried {
				if strings.HasPrefix(n.Object, "rows of") {
					t.Errorf("result: not carried %s (%s)", n.Object, n.Reason)
				}
			}
			fc := external.Connect(t, names.ForkDatabase(fork, "app"))
			want := map[string]int{"full_copy": 1, "schema_only": 0}[mode]
			if n := queryInt(t, fc, sets); n != want {
				t.Fatalf("the fork has %d partition sets, want %d", n, want)
			}
			if mode == "full_copy" {
				// partman in the fork makes the fork's next partitions, as the admin would run it.
				mustExec(t, fc, `UPDATE partman.part_config SET premake = 4 WHERE parent_table = 'public.events';
					SELECT partman.run_maintenance('public.events')`)
				if n := queryInt(t, fc, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.events'::regclass`); n <= queryInt(t, conn,
					`SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.events'::regclass`) {
					t.Errorf("partman's maintenance made no partition in the fork (%d)", n)
				}
				if n := queryInt(t, fc, `SELECT count(*) FROM public.events`); n != 5 {
					t.Errorf("the fork has %d events, want 5", n)
				}
			}
			_ = fc.Close(f.ctx)
			f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
		})
	}
	mustExec(t, a.conn, `SELECT dataenv.remove_datatable($1, 'app')`, ws)
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
}
