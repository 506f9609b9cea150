package forks_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

// TestCrashInSchemaOnlyFork kills the sidecar (SIGKILL) at each point of a schema_only fork,
// including after CREATE DATABASE and before the schema is loaded; after a restart the request
// finishes once, with the complete schema, one copy database, one registry row, no staging
// database left.
func TestCrashInSchemaOnlyFork(t *testing.T) {
	for _, point := range []string{"fork.after_create_database", "fork.after_load", "fork.before_commit"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			env := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
			f := newFixture(t, env...)
			a := f.newUser()
			p := f.parentDB("p", 10)
			ws, fork := wsID("ws"), wsID("fork")
			mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
			f.grantDatabase(a, f.name, p)
			mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
			id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)
			waitExit(t, f.sidecar)
			f.sidecar = f.startSidecar(env...) // the marker keeps it from dying twice
			f.mustSucceed(id)

			copyDB := names.ForkDatabase(fork, "d")
			if s, ps := schemaOf(t, copyDB), schemaOf(t, p); s != ps {
				t.Fatalf("after a crash at %s the copy's schema differs:\n%s\n---\n%s", point, s, ps)
			}
			if n := countRows(t, copyDB, "customers"); n != 0 {
				t.Fatalf("schema_only copy has %d rows", n)
			}
			ext := external.Connect(t, "postgres")
			// This request's staging database only: other tests make theirs on this cluster
			// meanwhile (dataenv_tmp_<request id in hex>).
			if n := queryInt(t, ext, `SELECT count(*) FROM pg_database WHERE datname = 'dataenv_tmp_' || replace($2, '-', '') OR datname LIKE $1`,
				names.ForkPrefix+"%"+copyDB[len(copyDB)-8:], id); n != 1 {
				t.Fatalf("after a crash at %s: %d copy or staging databases, want exactly 1", point, n)
			}
			if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND state = 'ready' AND created_by_request = $2::uuid`, fork, id); n != 1 {
				t.Fatalf("%d ready registry rows", n)
			}
			if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspaces WHERE id = $1 AND is_fork AND created_by_request = $2::uuid`, fork, id); n != 1 {
				t.Fatal("fork workspace missing")
			}
			if a := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); a < 2 {
				t.Fatalf("attempts %d: the crash did not happen inside the handler", a)
			}
		})
	}
}

// TestCrashInDropFork: SIGKILL after the workspace row is gone, before the copies are dropped:
// the rerun drops them and removes their registry rows.
func TestCrashInDropFork(t *testing.T) {
	t.Parallel()
	env := []string{"DATAENV_CRASH_AT=" + "fork.after_workspace_drop", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	f := newFixture(t, env...)
	a := f.newUser()
	p := f.parentDB("p", 10)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork))
	id := f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork)
	waitExit(t, f.sidecar)
	f.sidecar = f.startSidecar(env...)
	f.mustSucceed(id)
	if databaseExists(t, names.ForkDatabase(fork, "d")) || !databaseExists(t, p) {
		t.Fatal("after the crash, drop_fork dropped the wrong databases")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, fork); n != 0 {
		t.Fatal("registry rows remain")
	}
}

// TestCrashInCascadeDrop kills the sidecar right after a cascade deleted the child's workspace
// row (the child goes first), before its cleanup: the next attempt finds the child by its
// tombstone and drops its copy too (before, it saw only the parent, and the request succeeded
// with the child's copy, registry row and roles left behind).
func TestCrashInCascadeDrop(t *testing.T) {
	t.Parallel()
	env := []string{"DATAENV_CRASH_AT=" + "fork.after_workspace_drop", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	f := newFixture(t, env...)
	a := f.newUser()
	p := f.parentDB("p", 10)
	ws, fork := wsID("ws"), wsID("fork")
	child := fork + "/c"
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "keep_original"}')`, ws, fork))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, fork, child))
	id := f.request(a.conn, `SELECT dataenv.drop_fork($1, cascade => true)`, fork)
	waitExit(t, f.sidecar)
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspaces WHERE id = $1`, child); n != 0 {
		t.Fatal("the crash point was not after the child's row went")
	}
	f.sidecar = f.startSidecar(env...)
	f.mustSucceed(id)
	if databaseExists(t, names.ForkDatabase(child, "d")) || !databaseExists(t, p) {
		t.Fatal("after the crash, the cascade left the child's copy (or dropped the parent's database)")
	}
	for what, sql := range map[string]string{
		"registry rows":       `SELECT count(*) FROM dataenv.fork_copies WHERE workspace IN ($1, $2)`,
		"workspace rows":      `SELECT count(*) FROM dataenv.workspaces WHERE id IN ($1, $2)`,
		"workspace role rows": `SELECT count(*) FROM dataenv.workspace_roles WHERE workspace IN ($1, $2)`,
		"tombstones":          `SELECT count(*) FROM dataenv.workspace_tombstones WHERE id IN ($1, $2)`,
	} {
		if n := queryInt(t, f.sql, sql, fork, child); n != 0 {
			t.Errorf("%d %s left after the cascade", n, what)
		}
	}
}

// TestCrashInSchemaTemplateBuild kills the sidecar while it builds a schema template (its
// database created and empty; restored, not yet ready) or the template's spare (created, not
// closed nor ready): the rerun of the request drops the interrupted database and builds the
// template and its spare once; the next fork takes the spare.
func TestCrashInSchemaTemplateBuild(t *testing.T) {
	for _, point := range []string{"fork.template.after_create_database", "fork.template.after_load", "fork.template.spare_created"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			env := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
			f, a, p, ws := newCrashWorkspace(t, env)
			res := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, wsID("f"))), "d")
			waitExit(t, f.sidecar)
			f.sidecar = f.startSidecar(env...)
			f.mustSucceed(res.Fidelity.Template.Request)
			tpls := queryString(t, f.sql, `SELECT string_agg(database || ':' || state || ':' || (spare_of IS NULL), ',' ORDER BY spare_of NULLS FIRST)
				FROM dataenv.schema_templates WHERE workspace = $1`, ws)
			parts := strings.Split(tpls, ",")
			if len(parts) != 2 || !strings.HasSuffix(parts[0], ":ready:true") || !strings.HasSuffix(parts[1], ":ready:false") {
				t.Fatalf("after a crash at %s the templates are %q, want one ready template and one ready spare", point, tpls)
			}
			spare := strings.Split(parts[1], ":")[0]
			ext := external.Connect(t, "postgres")
			if n := queryInt(t, ext, `SELECT count(*) FROM pg_database WHERE datname LIKE 'dataenv\_tmp\_%' OR datname LIKE 'dataenv\_tpl\_' || $1 || '%'`,
				strings.ReplaceAll(ws, "-", "_")); n != 2 {
				t.Fatalf("after a crash at %s: %d template, spare or staging databases, want 2", point, n)
			}
			checkSpareRoles(t, f, ext, ws, point)
			fork := wsID("f")
			r := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)), "d")
			if r.Method != "schema_template" || r.Fidelity.Template.Spare != spare {
				t.Fatalf("the fork after the rebuilt template was made by %s from spare %q, want the spare %s", r.Method, r.Fidelity.Template.Spare, spare)
			}
			if s, ps := schemaOf(t, names.ForkDatabase(fork, "d")), schemaOf(t, p); s != ps {
				t.Fatalf("fork from the rebuilt template differs:\n%s\n---\n%s", s, ps)
			}
		})
	}
}

// checkSpareRoles fails unless the spare roles of workspace's entries on the cluster are exactly
// those of its spares' ledger rows: an interrupted build or take leaves no role behind.
func checkSpareRoles(t *testing.T, f *fixture, ext *pgx.Conn, ws, point string) {
	t.Helper()
	onCluster := queryString(t, ext, `SELECT coalesce(string_agg(rolname, ',' ORDER BY rolname), '') FROM pg_roles
		WHERE rolname LIKE 'dataenv\_spare\_' || $1 || '\_%'`, strings.ReplaceAll(ws, "-", "_"))
	recorded := queryString(t, f.sql, `SELECT coalesce(string_agg(role, ',' ORDER BY role), '') FROM dataenv.schema_templates
		WHERE workspace = $1 AND role IS NOT NULL`, ws)
	if onCluster != recorded || recorded == "" {
		t.Fatalf("after a crash at %s the cluster has spare roles %q, the ledger %q", point, onCluster, recorded)
	}
}

// newCrashWorkspace is a fixture whose sidecar runs with env, a user, a 10-table parent and a
// workspace of that user with the parent as datatable d.
func newCrashWorkspace(t *testing.T, env []string) (*fixture, user, string, string) {
	f := newFixture(t, env...)
	a := f.newUser()
	p := f.parentDB("p", 10)
	ws := wsID("ws")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	return f, a, p, ws
}

// rerunAfterCrash waits for the sidecar to die at its crash point while it runs request id,
// starts it again (env: the same crash point, which does not fire twice), and returns the
// result of datatable d once the request succeeded in a later attempt.
func rerunAfterCrash(t *testing.T, f *fixture, id string, env []string) forkFidelity {
	t.Helper()
	waitExit(t, f.sidecar)
	f.sidecar = f.startSidecar(env...)
	res := f.forkResult(f.mustSucceed(id), "d")
	if a := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); a < 2 {
		t.Fatalf("attempts %d: the crash did not happen inside the handler", a)
	}
	return res
}

// checkRecordsExist fails the test if a record of a database on the fixture's cluster names a
// database that is gone.
func checkRecordsExist(t *testing.T, f *fixture, point string) {
	t.Helper()
	recs, err := f.sql.Query(f.ctx, `SELECT name FROM dataenv.managed_databases WHERE cluster = $1`, f.name)
	if err != nil {
		t.Fatal(err)
	}
	dbs, err := pgx.CollectRows(recs, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range dbs {
		if !databaseExists(t, n) {
			t.Errorf("after a crash at %s the record of database %s names a database that is gone", point, n)
		}
	}
}

// waitExit waits for the sidecar to die by itself at its armed crash point.
func waitExit(t *testing.T, p *sidecartest.Process) {
	t.Helper()
	if err := p.WaitExit(90 * time.Second); err != nil {
		t.Fatalf("the sidecar did not die at the crash point: %v", err)
	}
}

// TestCrashTakingASpare kills the sidecar while a schema_only fork takes the template's spare:
// after the spare's record is removed (the database still under the spare's name), and after it
// was renamed to the fork's staging name (not marked yet). The rerun makes the copy once, with
// the parent's schema; the refresh the fork asks for cleans up what the interrupted take left
// (the spare's ledger row, its database if still there) and makes a new spare; no record names
// a database that is gone, and nothing is left under the spare's or the staging name.
func TestCrashTakingASpare(t *testing.T) {
	for _, point := range []string{"cluster.create_database.after_spare_unrecorded", "cluster.create_database.after_spare_taken"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			env := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
			f, a, p, ws := newCrashWorkspace(t, env)
			first := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, wsID("f"))), "d")
			f.mustSucceed(first.Fidelity.Template.Request)
			spare := queryString(t, f.sql, `SELECT database FROM dataenv.schema_templates WHERE workspace = $1 AND spare_of IS NOT NULL AND state = 'ready'`, ws)

			fork := wsID("f")
			id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)
			waitExit(t, f.sidecar)
			f.sidecar = f.startSidecar(env...)
			res := f.forkResult(f.mustSucceed(id), "d")
			if res.Method != "schema_template" {
				t.Fatalf("after a crash at %s the fork was made by %s", point, res.Method)
			}
			copyDB := names.ForkDatabase(fork, "d")
			if s, ps := schemaOf(t, copyDB), schemaOf(t, p); s != ps {
				t.Fatalf("after a crash at %s the copy's schema differs:\n%s\n---\n%s", point, s, ps)
			}
			if a := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); a < 2 {
				t.Fatalf("attempts %d: the crash did not happen inside the handler", a)
			}
			f.mustSucceed(res.Fidelity.Template.Request)

			ext := external.Connect(t, "postgres")
			if n := queryInt(t, ext, `SELECT count(*) FROM pg_database WHERE datname IN ($1, 'dataenv_tmp_' || replace($2, '-', ''))`, spare, id); n != 0 {
				t.Fatalf("after a crash at %s the spare %s or the fork's staging database is left", point, spare)
			}
			rows := queryString(t, f.sql, `SELECT string_agg(state || ':' || (spare_of IS NULL), ',' ORDER BY spare_of NULLS FIRST)
				FROM dataenv.schema_templates WHERE workspace = $1`, ws)
			if rows != "ready:true,ready:false" {
				t.Fatalf("after a crash at %s the ledger rows are %q, want a ready template and a ready spare", point, rows)
			}
			checkRecordsExist(t, f, point)
			if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND state = 'ready'`, fork); n != 1 {
				t.Fatalf("%d ready registry rows of the fork", n)
			}
			checkSpareRoles(t, f, ext, ws, point)
			ownedBy(t, copyDB, res.Fidelity.Owner)
		})
	}
}

// TestCrashTakingASpareForAnExistingRole kills the sidecar right after a reset_fork took the
// spare (the fork's workspace role exists, so the spare's role was renamed for the reset's copy,
// still owning its objects). The rerun drops that copy and the renamed role, makes the copy
// again, the fork role's, with the parent's schema; once the refresh ran, the cluster has the
// spare roles the ledger records and no role of the interrupted take.
func TestCrashTakingASpareForAnExistingRole(t *testing.T) {
	t.Parallel()
	point := "cluster.create_database.after_spare_taken"
	env := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	f, a, p, ws := newCrashWorkspace(t, env)
	fork := wsID("f")
	first := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)), "d")
	f.mustSucceed(first.Fidelity.Template.Request) // a template and its spare

	id := f.request(a.conn, `SELECT dataenv.reset_fork($1)`, fork)
	res := rerunAfterCrash(t, f, id, env)
	copyDB := names.ForkDatabase(fork, "d")
	if s, ps := schemaOf(t, copyDB), schemaOf(t, p); res.Method != "schema_template" || s != ps {
		t.Fatalf("after a crash at %s the copy was made by %s; its schema:\n%s\n---\nthe parent's:\n%s", point, res.Method, s, ps)
	}
	ownedBy(t, copyDB, first.Fidelity.Owner)
	if left := takenRolesOf(t, fork); left != "" {
		t.Fatalf("after a crash at %s the interrupted take left roles %s", point, left)
	}
	f.mustSucceed(res.Fidelity.Template.Request)
	checkSpareRoles(t, f, external.Connect(t, "postgres"), ws, point)
}

// TestCrashDroppingASchemaTemplate kills the sidecar after a refresh dropped an outdated
// template's database and before its ledger row went, then brings the parent's schema back to
// that template's fingerprint (a comment made and removed) before the refresh runs again. The
// row must not be taken for the current template: the rerun builds one for the schema the parent
// has, every ready row names a database that exists, and the forks after it are copies of it.
func TestCrashDroppingASchemaTemplate(t *testing.T) {
	t.Parallel()
	env := []string{"DATAENV_CRASH_AT=fork.template.dropped", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	f, a, p, ws := newCrashWorkspace(t, env)
	fork := func() (forkFidelity, string) {
		name := wsID("f")
		return f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, name)), "d"), name
	}
	readyWithoutDatabase := func(when string) { t.Helper(); checkReadyTemplatesExist(t, f, ws, when) }
	first, _ := fork()
	f.mustSucceed(first.Fidelity.Template.Request) // the first template and its spare: nothing to drop

	parent := external.Connect(t, p)
	defer parent.Close(f.ctx)
	mustExec(t, parent, `COMMENT ON TABLE customers IS 'a comment that changes the fingerprint'`)
	changed, _ := fork()
	if changed.Method != "dump" {
		t.Fatalf("the fork after a schema change was made by %s, want dump", changed.Method)
	}
	waitExit(t, f.sidecar) // its refresh built the new template and died dropping the old one
	mustExec(t, parent, `COMMENT ON TABLE customers IS NULL`)
	f.sidecar = f.startSidecar(env...)
	f.mustSucceed(changed.Fidelity.Template.Request)
	readyWithoutDatabase("after the rerun of the refresh")

	for i := range 2 { // the spare, then a copy of the template itself (the refresh makes a new spare)
		r, name := fork()
		if r.Method != "schema_template" {
			t.Fatalf("fork %d after the interrupted drop was made by %s, want schema_template", i, r.Method)
		}
		if s, ps := schemaOf(t, names.ForkDatabase(name, "d")), schemaOf(t, p); s != ps {
			t.Fatalf("fork %d after the interrupted drop differs from the parent:\n%s\n---\n%s", i, s, ps)
		}
		f.mustSucceed(r.Fidelity.Template.Request)
		readyWithoutDatabase(fmt.Sprintf("after the refresh of fork %d", i))
	}
}

// checkReadyTemplatesExist fails t when a ready schema template (or spare) row of workspace ws
// names a database that is gone.
func checkReadyTemplatesExist(t *testing.T, f *fixture, ws, when string) {
	t.Helper()
	ready := queryString(t, f.sql, `SELECT coalesce(string_agg(database, ','), '') FROM dataenv.schema_templates
		WHERE workspace = $1 AND state = 'ready'`, ws)
	for _, db := range strings.Split(ready, ",") {
		if db != "" && !databaseExists(t, db) {
			t.Fatalf("%s: the ready ledger row of %s names a database that is gone", when, db)
		}
	}
}

// TestMissingSchemaTemplateIsRebuilt starts from what an older release could leave after an
// interrupted drop: a ready template row whose database and record are gone. A schema_only fork
// that finds no spare is restored from a dump instead of failing, and the refresh it asks for
// builds the template again; the next fork copies it.
func TestMissingSchemaTemplateIsRebuilt(t *testing.T) {
	t.Parallel()
	f, a, p, ws := newCrashWorkspace(t, nil)
	fork := func() (forkFidelity, string) {
		name := wsID("f")
		return f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, name)), "d"), name
	}
	first, _ := fork()
	f.mustSucceed(first.Fidelity.Template.Request)
	tpl := queryString(t, f.sql, `SELECT database FROM dataenv.schema_templates WHERE workspace = $1 AND spare_of IS NULL`, ws)
	ext := external.Connect(t, "postgres")
	mustExec(t, ext, `DROP DATABASE `+ident(tpl))
	mustExec(t, f.sql, `DELETE FROM dataenv.managed_databases WHERE name = $1`, tpl)
	mustExec(t, f.sql, `UPDATE dataenv.schema_templates SET state = 'building' WHERE workspace = $1 AND spare_of IS NOT NULL`, ws)

	r, _ := fork()
	if r.Method != "dump" {
		t.Fatalf("the fork whose template is gone was made by %s, want dump", r.Method)
	}
	f.mustSucceed(r.Fidelity.Template.Request)
	checkReadyTemplatesExist(t, f, ws, "after the refresh")
	r, name := fork()
	if r.Method != "schema_template" {
		t.Fatalf("the fork after the template was rebuilt was made by %s, want schema_template", r.Method)
	}
	if s, ps := schemaOf(t, names.ForkDatabase(name, "d")), schemaOf(t, p); s != ps {
		t.Fatalf("the fork from the rebuilt template differs from the parent:\n%s\n---\n%s", s, ps)
	}
}

// TestCrashInARollbackThenRetried: a create_fork fails for a passing fault before its commit (a
// test hook), its rollback drops the copy's database and the sidecar dies before the copy's
// registry row and record go. The request runs again: the row must not count as a ready copy
// (the database is gone); the copy is made again and the fork succeeds with it.
func TestCrashInARollbackThenRetried(t *testing.T) {
	t.Parallel()
	env := []string{"DATAENV_CRASH_AT=fork.fail_before_commit,cluster.drop_database.after_drop", "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
	f, a, p, ws := newCrashWorkspace(t, env)
	fork := wsID("f")
	id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork)
	waitExit(t, f.sidecar)
	f.sidecar = f.startSidecar(env...)
	f.mustSucceed(id)
	db := names.ForkDatabase(fork, "d")
	if !databaseExists(t, db) {
		t.Fatalf("fork %s succeeded without its copy %s", fork, db)
	}
	if s, ps := schemaOf(t, db), schemaOf(t, p); s != ps {
		t.Fatalf("the copy made again differs from the parent:\n%s\n---\n%s", s, ps)
	}
}

// TestFailReadingThePlanAfterTheTake makes the rest of a schema_only fork's plan fail to read
// (a transient fault right after the plan's head) while the copy, made from that head, takes the
// template's spare with its role. The attempt fails with the copy made: its rollback drops the
// copy and the role the spare's became, and the retry makes the fork with the parent's schema,
// owned by the fork's role, leaving no role of the failed take.
func TestFailReadingThePlanAfterTheTake(t *testing.T) {
	t.Parallel()
	f, a, p, ws := newCrashWorkspace(t, nil)
	first := f.forkResult(f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, wsID("f"))), "d")
	f.mustSucceed(first.Fidelity.Template.Request) // a template and its spare with a role
	if err := f.sidecar.Stop(time.Minute); err != nil {
		t.Fatalf("stop the sidecar: %v", err)
	}
	point := "fork.fail_after_plan_head"
	f.sidecar = f.startSidecar("DATAENV_CRASH_AT="+point, "DATAENV_CRASH_MARKER_DIR="+t.TempDir())

	fork := wsID("g")
	id := f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, ws, fork)
	res := f.forkResult(f.mustSucceed(id), "d")
	if a := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); a < 2 {
		t.Fatalf("attempts %d: the injected failure at %s did not fail an attempt", a, point)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.requests, jsonb_array_elements(steps) s
		WHERE id = $1::uuid AND s->>'status' = 'copying' AND s->>'detail' LIKE '%a spare TEMPLATE copy%'`, id); n == 0 {
		t.Fatalf("no attempt of the fork took the spare before its plan was read in full")
	}
	copyDB := names.ForkDatabase(fork, "d")
	if s, ps := schemaOf(t, copyDB), schemaOf(t, p); res.Method != "schema_template" || s != ps {
		t.Fatalf("after a failure at %s the copy was made by %s; its schema:\n%s\n---\nthe parent's:\n%s", point, res.Method, s, ps)
	}
	ownedBy(t, copyDB, f.forkRole(fork))
	if left := takenRolesOf(t, fork); left != "" {
		t.Fatalf("after a failure at %s the failed take left roles %s", point, left)
	}
	f.mustSucceed(res.Fidelity.Template.Request)
	checkSpareRoles(t, f, external.Connect(t, "postgres"), ws, point)
}
