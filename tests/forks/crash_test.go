package forks_test

import (
	"testing"
	"time"

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
			if n := queryInt(t, ext, `SELECT count(*) FROM pg_database WHERE datname LIKE 'dataenv\_tmp\_%' OR datname LIKE $1`,
				names.ForkPrefix+"%"+copyDB[len(copyDB)-8:]); n != 1 {
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

// waitExit waits for the sidecar to die by itself at its armed crash point.
func waitExit(t *testing.T, p *sidecartest.Process) {
	t.Helper()
	if err := p.WaitExit(90 * time.Second); err != nil {
		t.Fatalf("the sidecar did not die at the crash point: %v", err)
	}
}
