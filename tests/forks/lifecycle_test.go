package forks_test

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestParentDroppedForkKeepsWorking: the parent workspace is dropped while its fork lives. The
// fork stays a fork (orphaned, is_fork cannot be cleared), its datatables still resolve (the
// keep_original one to the database recorded at fork time), and drop_fork still cleans it up.
func TestParentDroppedForkKeepsWorking(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("p", 4)
	ws, fork, sub := wsID("ws"), wsID("fork"), wsID("sub")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'kept', $2, $3)`, ws, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'copied', $2, $3)`, ws, f.name, p)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"copied": "schema_only"}')`, ws, fork))

	mustExec(t, a.conn, `SELECT dataenv.drop_workspace($1)`, ws)
	var isFork bool
	var parent *string
	if err := a.conn.QueryRow(f.ctx, `SELECT is_fork, parent FROM dataenv.workspaces WHERE id = $1`, fork).Scan(&isFork, &parent); err != nil {
		t.Fatal(err)
	}
	if !isFork || parent != nil {
		t.Fatalf("orphaned fork: is_fork %v parent %v", isFork, parent)
	}
	if err := sqlErr(f.sql, `UPDATE dataenv.workspaces SET is_fork = false WHERE id = $1`, fork); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Fatalf("clearing is_fork as the owner: %v", err)
	}
	if err := sqlErr(f.sql, `UPDATE dataenv.workspaces SET parent = $2 WHERE id = $1`, fork, fork); err == nil {
		t.Fatal("re-parenting a fork succeeded")
	}
	var fallback bool
	var db string
	if err := a.conn.QueryRow(f.ctx, `SELECT database, fallback FROM dataenv.resolve_datatable($1, 'kept')`, fork).Scan(&db, &fallback); err != nil {
		t.Fatal(err)
	}
	if db != p || !fallback {
		t.Fatalf("orphaned keep_original resolves to %s (fallback %v), want %s", db, fallback, p)
	}
	if got := resolve(t, a, fork, "copied"); got.database != names.ForkDatabase(fork, "copied") {
		t.Fatalf("orphaned fork's copy resolves to %+v", got)
	}
	// A fork of the orphan works, and its chain ends at the orphan.
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"kept": "full_copy"}')`, fork, sub))
	if n := countRows(t, names.ForkDatabase(sub, "kept"), "customers"); n != 4 {
		t.Fatalf("copy of an orphan's keep_original datatable has %d rows", n)
	}
	if n := queryInt(t, a.conn, `SELECT count(*) FROM dataenv.fork_chain($1) WHERE orphaned`, sub); n != 1 {
		t.Fatal("the chain does not report the orphaned ancestor")
	}
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1, cascade => true)`, fork))
	if databaseExists(t, names.ForkDatabase(fork, "copied")) || databaseExists(t, names.ForkDatabase(sub, "kept")) || !databaseExists(t, p) {
		t.Fatal("drop_fork of an orphan dropped the wrong databases")
	}
}

// TestPartialDropAndRecreate: a copy whose marker was tampered with cannot be dropped: drop_fork
// reports it, drops the rest, keeps its registry row, and can be run again; re-creating the fork
// id first retries that cleanup and refuses while it fails; once it can succeed, the new fork
// gets fresh copies.
func TestPartialDropAndRecreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("p", 4)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'one', $2, $3)`, ws, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'two', $2, $3)`, ws, f.name, p)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"one": "schema_only", "two": "schema_only"}')`, ws, fork))
	one, two := names.ForkDatabase(fork, "one"), names.ForkDatabase(fork, "two")
	ext := external.Connect(t, "postgres")
	marker := queryString(t, ext, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, two)
	mustExec(t, ext, `COMMENT ON DATABASE `+ident(two)+` IS 'not dataenv''s any more'`)

	f.mustFail(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork), two)
	if databaseExists(t, one) || !databaseExists(t, two) {
		t.Fatal("partial drop: wrong databases")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND database = $2`, fork, two); n != 1 {
		t.Fatal("the failed copy's registry row is gone")
	}
	// The refused drop dropped nothing: the row says ready again, not dropping.
	if st := queryString(t, f.sql, `SELECT state FROM dataenv.fork_copies WHERE workspace = $1 AND database = $2`, fork, two); st != "ready" {
		t.Fatalf("the registry row of the copy whose drop was refused says %q, want ready", st)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, fork); n != 1 {
		t.Fatal("the dropped copy's registry row remains")
	}
	// The workspace is gone: a new fork with the same id retries the cleanup, and refuses.
	f.mustFail(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"two": "full_copy"}')`, ws, fork), "cannot be dropped yet")
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspaces WHERE id = $1`, fork); n != 0 {
		t.Fatal("the refused fork exists")
	}
	// Repaired: the re-created fork drops the stale copy and makes a fresh one (with rows).
	mustExec(t, ext, `COMMENT ON DATABASE `+ident(two)+` IS `+literal(marker))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"two": "full_copy"}')`, ws, fork))
	if n := countRows(t, two, "customers"); n != 4 {
		t.Fatalf("re-created fork's copy has %d rows, want 4 (a fresh full copy, not the stale schema_only one)", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, fork); n != 1 {
		t.Fatal("registry rows after re-creation")
	}
	// drop_fork after a partial failure, run again, finishes.
	mustExec(t, ext, `COMMENT ON DATABASE `+ident(two)+` IS 'tampered'`)
	f.mustFail(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork), "run dataenv.drop_fork again")
	marker = queryString(t, f.sql, `SELECT 'managed by dataenv; database; request ' || created_by_request FROM dataenv.fork_copies WHERE database = $1`, two)
	mustExec(t, ext, `COMMENT ON DATABASE `+ident(two)+` IS `+literal(marker))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
	if databaseExists(t, two) || queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, fork) != 0 {
		t.Fatal("the retried drop_fork left the copy")
	}
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
