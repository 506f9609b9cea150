package forks_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/dataenv/dataenv/tests/testenv"
)

// cloneCluster starts a PostgreSQL 18 cluster whose data directory is on a file system of
// fsType made in an image on a loop device (inside the 18 root, which must see it), stopped
// before the file system is unmounted.
func cloneCluster(t *testing.T, fsType string) *testenv.Postgres {
	t.Helper()
	srv, err := testenv.FindPGServer(18)
	if err != nil {
		t.Fatal(err)
	}
	parent := ""
	if srv.Root != "" {
		// The server checks the cluster directory against its root with symlinks resolved (a
		// worktree's .deps is a symlink to the main checkout's).
		root, err := filepath.EvalSymlinks(srv.Root)
		if err != nil {
			root = srv.Root
		}
		parent = filepath.Join(root, "tmp")
	}
	fs := testenv.StartLoopFS(t, fsType, parent, 1<<30)
	pg, err := testenv.StartPostgres(context.Background(), testenv.PGOptions{Name: "clone-" + fsType, Version: 18,
		Dir: filepath.Join(fs.Dir, "pg")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	return pg
}

// forkResult is the part of a create_fork result these tests read.
type forkResult struct {
	Datatables []struct {
		Datatable        string `json:"datatable"`
		Method           string `json:"method"`
		CloneUnavailable string `json:"clone_unavailable"`
	} `json:"datatables"`
}

func (r forkResult) method(dt string) (method, why string) {
	for _, d := range r.Datatables {
		if d.Datatable == dt {
			return d.Method, d.CloneUnavailable
		}
	}
	return "", ""
}

// TestFullCopyClonesOnPostgreSQL18: on PostgreSQL 18 with the data directory on Btrfs and an
// admin that may read data_directory (a non-superuser CREATEDB CREATEROLE admin granted
// pg_read_all_settings), full_copy of an idle parent is a reflink clone (STRATEGY FILE_COPY,
// file_copy_method = clone): the copy holds the rows, belongs to the application role and
// writes in it stay in it. Without the grant the same fork is a TEMPLATE copy, and the result
// says why; schema_only on the same cluster runs pg_dump 18.
func TestFullCopyClonesOnPostgreSQL18(t *testing.T) {
	t.Parallel()
	pg := cloneCluster(t, "btrfs")
	f := newFixtureOn(t, pg)
	super := pg.Connect(t, "postgres")
	mustExec(t, super, `GRANT pg_read_all_settings TO `+ident(f.adminUser))
	a := f.newUser()
	parent := f.parentDB("p", 200)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, parent)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, parent)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 's', $2, $3)`, ws, f.name, parent)

	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy", "s": "schema_only"}')`, ws, fork))
	var res forkResult
	decode(t, r.result, &res)
	if m, why := res.method("d"); m != "clone" || why != "" {
		t.Fatalf("full_copy on Btrfs: method %q (%s), want clone\n%s", m, why, r.result)
	}
	if m, _ := res.method("s"); m != "dump" || !strings.Contains(string(r.steps), "pg_dump 18.") {
		t.Fatalf("schema_only on PostgreSQL 18: method %q, steps %s; want dump with pg_dump 18", m, r.steps)
	}
	if got := queryString(t, f.sql, `SELECT method FROM dataenv.fork_copies WHERE workspace = $1 AND datatable = 'd'`, fork); got != "clone" {
		t.Fatalf("registry method %q, want clone", got)
	}
	clone := pg.Connect(t, names.ForkDatabase(fork, "d"))
	if n := queryInt(t, clone, `SELECT count(*) FROM orders`); n != 200 {
		t.Fatalf("the clone has %d orders, want 200", n)
	}
	owner := f.forkRole(fork)
	if got := queryString(t, clone, `SELECT tableowner FROM pg_tables WHERE tablename = 'orders'`); got != owner {
		t.Fatalf("orders in the clone owned by %s, want the fork's role %s", got, owner)
	}
	mustExec(t, clone, `SET ROLE `+ident(owner))
	mustExec(t, clone, `DELETE FROM orders`)
	p := pg.Connect(t, parent)
	if n := queryInt(t, p, `SELECT count(*) FROM orders`); n != 200 {
		t.Fatalf("the parent has %d orders after writes in the clone, want 200", n)
	}
	_ = p.Close(f.ctx) // the parent must be idle again for the next full_copy
	waitIdle(t, super, parent)

	mustExec(t, super, `REVOKE pg_read_all_settings FROM `+ident(f.adminUser))
	fork2 := wsID("fork")
	r = f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork2))
	decode(t, r.result, &res)
	if m, why := res.method("d"); m != "template" || !strings.Contains(why, "may not read data_directory") {
		t.Fatalf("without pg_read_all_settings: method %q (%s), want template and why\n%s", m, why, r.result)
	}
}

// TestFullCopyOnExt4DoesNotClone: on PostgreSQL 18 with the data directory on ext4, which
// would turn a clone into a full file copy, full_copy of an idle parent stays a TEMPLATE copy
// and the result names the file system.
func TestFullCopyOnExt4DoesNotClone(t *testing.T) {
	t.Parallel()
	pg := cloneCluster(t, "ext4")
	f := newFixtureOn(t, pg)
	mustExec(t, pg.Connect(t, "postgres"), `GRANT pg_read_all_settings TO `+ident(f.adminUser))
	a := f.newUser()
	parent := f.parentDB("p", 20)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, parent)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, parent)
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork))
	var res forkResult
	decode(t, r.result, &res)
	if m, why := res.method("d"); m != "template" || !strings.Contains(why, "on ext4, which cannot clone") {
		t.Fatalf("full_copy on ext4: method %q (%s), want template and the file system named\n%s", m, why, r.result)
	}
	if n := queryInt(t, pg.Connect(t, names.ForkDatabase(fork, "d")), `SELECT count(*) FROM orders`); n != 20 {
		t.Fatalf("the copy has %d orders, want 20", n)
	}
}
