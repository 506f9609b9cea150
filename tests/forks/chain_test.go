package forks_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dataenv/dataenv/sidecar/names"
)

// TestChainOfThreeAndDrop: ws -> f1 -> f2 -> f3, each level copying or keeping; every datatable
// of every level resolves to the right database. Then drop_fork: refused with a child unless
// cascade; it removes exactly the dropped forks' databases and registry rows.
func TestChainOfThreeAndDrop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	pa, pb := f.parentDB("pa", 5), f.parentDB("pb", 5)
	ws, f1, f2, f3 := wsID("ws"), wsID("f1"), wsID("f2"), wsID("f3")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, pa)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'a', $2, $3)`, ws, f.name, pa)
	f.grantDatabase(a, f.name, pb)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'b', $2, $3)`, ws, f.name, pb)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"a": "schema_only"}')`, ws, f1))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"b": "full_copy"}')`, f1, f2))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2)`, f2, f3))

	f1a, f2b := names.ForkDatabase(f1, "a"), names.ForkDatabase(f2, "b")
	want := map[string][2]string{ // workspace/datatable -> database, resolved from
		f1 + "/a": {f1a, f1}, f1 + "/b": {pb, ws},
		f2 + "/a": {f1a, f1}, f2 + "/b": {f2b, f2},
		f3 + "/a": {f1a, f1}, f3 + "/b": {f2b, f2},
	}
	for k, w := range want {
		wsName, dt, _ := strings.Cut(k, "/")
		if got := resolve(t, a, wsName, dt); got.database != w[0] || got.from != w[1] {
			t.Errorf("%s resolves to %s from %s, want %s from %s", k, got.database, got.from, w[0], w[1])
		}
	}
	var chain []string
	rows, _ := a.conn.Query(f.ctx, `SELECT ancestor FROM dataenv.fork_chain($1) ORDER BY depth`, f3)
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		chain = append(chain, s)
	}
	if strings.Join(chain, ">") != strings.Join([]string{f3, f2, f1, ws}, ">") {
		t.Fatalf("fork_chain(f3) = %v", chain)
	}
	if t.Failed() {
		return
	}

	// f2 has a child: refused without cascade (at the call, and again by the sidecar).
	if err := sqlErr(a.conn, `SELECT dataenv.drop_fork($1)`, f2); err == nil || !strings.Contains(err.Error(), "child forks") {
		t.Fatalf("drop_fork of a fork with a child: %v", err)
	}
	// Cascade drops f3 then f2: exactly f2's copy goes; f1's copy and the parents stay.
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1, cascade => true)`, f2))
	var res struct {
		Workspaces []string                    `json:"workspaces"`
		Dropped    []struct{ Database string } `json:"dropped"`
	}
	decode(t, r.result, &res)
	if strings.Join(res.Workspaces, ",") != f3+","+f2 || len(res.Dropped) != 1 || res.Dropped[0].Database != f2b {
		t.Fatalf("drop result %s", r.result)
	}
	if databaseExists(t, f2b) || !databaseExists(t, f1a) || !databaseExists(t, pa) || !databaseExists(t, pb) {
		t.Fatal("drop_fork removed the wrong databases")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspaces WHERE id IN ($1, $2)`, f2, f3); n != 0 {
		t.Fatalf("%d of f2, f3 still exist", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace IN ($1, $2)`, f2, f3); n != 0 {
		t.Fatal("registry rows of dropped forks remain")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_databases WHERE name = $1`, f2b); n != 0 {
		t.Fatal("the dropped copy's record remains")
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, f1); n != 1 {
		t.Fatal("f1's registry row is gone")
	}
	if n := countRows(t, pb, "orders"); n != 5 {
		t.Fatalf("parent has %d orders", n)
	}
	// Then f1 (no children left).
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, f1))
	if databaseExists(t, f1a) || !databaseExists(t, pa) {
		t.Fatal("drop_fork(f1) removed the wrong databases")
	}
}

// TestFullCopyOfBusyParent: the parent has a session, so TEMPLATE is impossible: the copy is a
// pg_dump | pg_restore, with progress steps, and has the rows.
func TestFullCopyOfBusyParent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, p, ws, fork := busyParent(t, f, "busy", 200)
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork))
	copyDB := names.ForkDatabase(fork, "d")
	if m := queryString(t, f.sql, `SELECT method FROM dataenv.fork_copies WHERE database = $1`, copyDB); m != "dump" {
		t.Fatalf("method %q, want dump", m)
	}
	if n := countRows(t, copyDB, "customers"); n != 200 {
		t.Fatalf("copy has %d customers, want 200", n)
	}
	if s, ps := schemaOf(t, copyDB), schemaOf(t, p); s != ps {
		t.Fatalf("copy schema differs:\n%s\n---\n%s", s, ps)
	}
	if !strings.Contains(string(r.steps), `"progress"`) || !strings.Contains(string(r.steps), "objects restored") {
		t.Fatalf("no progress step in %s", r.steps)
	}
	// The total, read while the copy's database was made, counts the tables and sizes them.
	if !regexp.MustCompile(`\(2 tables, [0-9.]+ KiB of table data on disk\)`).MatchString(string(r.steps)) {
		t.Fatalf("the loading step does not give the parent's 2 tables and their size: %s", r.steps)
	}
	// Progress is done/total: the last step has every table of the parent loaded.
	all := regexp.MustCompile(`table data (\d+)/(\d+) tables`).FindAllStringSubmatch(string(r.steps), -1)
	if len(all) == 0 || all[len(all)-1][1] != all[len(all)-1][2] || all[len(all)-1][2] == "0" {
		t.Fatalf("progress does not end at every table done: %v in %s", all, r.steps)
	}
	if owner, want := queryString(t, external.Connect(t, copyDB), `SELECT tableowner FROM pg_tables WHERE tablename = 'orders'`), f.forkRole(fork); owner != want {
		t.Fatalf("restored table owned by %q, want the fork's role %q", owner, want)
	}
}

// TestBusyParentCopyWhoseNameIsTaken: a full_copy by dump (a session is on the parent) whose
// copy's name belongs to a database dataenv did not create is refused when the database is to be
// made, after its pg_dump has started (it starts while the database is made): the foreign database
// keeps its rows, the dump is stopped and waited for with the copy (no pg_dump of the sidecar's
// is left, running or a zombie), and no session of dataenv's stays on the parent.
func TestBusyParentCopyWhoseNameIsTaken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, p, ws, fork := busyParent(t, f, "busyname", 20000)
	copyDB := names.ForkDatabase(fork, "d")
	mustExec(t, external.Connect(t, "postgres"), `CREATE DATABASE `+ident(copyDB))
	mustExec(t, external.Connect(t, copyDB), `CREATE TABLE keep (x int); INSERT INTO keep VALUES (1)`)
	r := f.mustFail(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork), "was not created by this request")
	if !strings.Contains(r.err, copyDB) || strings.Contains(string(r.steps), "TEMPLATE") {
		t.Fatalf("want a refusal naming %s, with no TEMPLATE copy tried (a session is on the parent): %s\nsteps: %s", copyDB, r.err, r.steps)
	}
	if n := countRows(t, copyDB, "keep"); n != 1 {
		t.Fatalf("the foreign database %s has %d rows in keep, want its 1", copyDB, n)
	}
	ext := external.Connect(t, "postgres")
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := queryInt(t, ext, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name LIKE 'dataenv/%'`, p)
		dumps := childrenNamed(t, f.sidecar.Pid(), "pg_dump")
		if n == 0 && len(dumps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the refused fork: %d session(s) of dataenv on the parent, pg_dump children of the sidecar %v", n, dumps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyParent makes a parent of rows customers with a session held on it (no TEMPLATE copy of it
// can be made), datatable d of a new workspace of a new user; it returns the user, the parent, the
// workspace and an id for its fork.
func busyParent(t *testing.T, f *fixture, suffix string, rows int) (user, string, string, string) {
	t.Helper()
	a := f.newUser()
	p := f.parentDB(suffix, rows)
	mustExec(t, external.Connect(t, p), `SELECT 1`)
	ws := wsID("ws")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	return a, p, ws, wsID("fork")
}

// childrenNamed lists the child processes of pid whose command is name, with their state (Z: a
// zombie nobody waited for), from /proc.
func childrenNamed(t *testing.T, pid int, name string) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its closing paren.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || s[open+1:end] != name || fields[1] != strconv.Itoa(pid) {
			continue
		}
		out = append(out, strings.TrimSpace(s[:open])+":"+fields[0])
	}
	return out
}
