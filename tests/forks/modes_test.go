package forks_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/names"
)

// wsID is a fresh workspace id (fork database names derive from it, and the external cluster
// is shared by the tests).
func wsID(kind string) string { return kind + "-" + uuid.NewString()[:8] }

type resolved struct{ cluster, database, from, mode string }

func resolve(t *testing.T, u user, ws, dt string) resolved {
	t.Helper()
	var r resolved
	err := u.conn.QueryRow(t.Context(), `SELECT cluster, database, resolved_from, mode FROM dataenv.resolve_datatable($1, $2)`, ws, dt).
		Scan(&r.cluster, &r.database, &r.from, &r.mode)
	if err != nil {
		t.Fatalf("resolve %s/%s as %s: %v", ws, dt, u.name, err)
	}
	return r
}

// TestForkModes: schema_only has the parent's tables, indexes and constraints and no rows;
// full_copy has the rows too (TEMPLATE: nobody is connected to the parent); writes in the fork
// never reach the parent; keep_original resolves to the parent's database.
func TestForkModes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p1, p2 := f.parentDB("p1", 50), f.parentDB("p2", 30)
	ws, fork := wsID("ws"), wsID("fork")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	for dt, db := range map[string]string{"shop": p1, "full": p2, "shared": p1} {
		f.grantDatabase(a, f.name, db)
		mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, $2, $3, $4)`, ws, dt, f.name, db)
	}
	r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"shop": "schema_only", "full": "full_copy"}')`, ws, fork))

	shop, full := names.ForkDatabase(fork, "shop"), names.ForkDatabase(fork, "full")
	if got := resolve(t, a, fork, "shop"); got.database != shop || got.cluster != f.name || got.mode != "schema_only" {
		t.Fatalf("shop resolves to %+v, want %s", got, shop)
	}
	if got := resolve(t, a, fork, "full"); got.database != full || got.mode != "full_copy" {
		t.Fatalf("full resolves to %+v, want %s", got, full)
	}
	if got := resolve(t, a, fork, "shared"); got.database != p1 || got.from != ws || got.mode != "keep_original" {
		t.Fatalf("keep_original resolves to %+v, want %s from %s", got, p1, ws)
	}

	if s, ps := schemaOf(t, shop), schemaOf(t, p1); s != ps {
		t.Fatalf("schema_only copy differs from its parent:\n--- copy\n%s\n--- parent\n%s", s, ps)
	}
	if n := countRows(t, shop, "customers") + countRows(t, shop, "orders"); n != 0 {
		t.Fatalf("schema_only copy has %d rows", n)
	}
	if s, ps := schemaOf(t, full), schemaOf(t, p2); s != ps {
		t.Fatalf("full_copy differs from its parent:\n--- copy\n%s\n--- parent\n%s", s, ps)
	}
	if n := countRows(t, full, "orders"); n != 30 {
		t.Fatalf("full_copy has %d orders, want 30", n)
	}
	var method string
	f.sql.QueryRow(f.ctx, `SELECT method FROM dataenv.fork_copies WHERE database = $1`, full).Scan(&method)
	if method != "template" {
		t.Fatalf("full_copy of an idle parent used %q, want template", method)
	}
	if !strings.Contains(string(r.result), `"status": "created"`) && !strings.Contains(string(r.result), `"status":"created"`) {
		t.Fatalf("result %s", r.result)
	}
	// The result says why the idle parent was not cloned (PostgreSQL before 18; on 18, an admin
	// that may not read data_directory, or a data directory on a file system that cannot clone).
	var res struct {
		Datatables []struct {
			Datatable        string `json:"datatable"`
			CloneUnavailable string `json:"clone_unavailable"`
		} `json:"datatables"`
	}
	decode(t, r.result, &res)
	for _, d := range res.Datatables {
		if d.Datatable == "full" && d.CloneUnavailable == "" {
			t.Fatalf("full_copy by template without the reason it did not clone: %s", r.result)
		}
	}

	// Writes in the fork stay in the fork; the app role owns the copy's tables.
	for _, db := range []string{shop, full} {
		conn := external.Connect(t, db)
		mustExec(t, conn, `SET ROLE `+ident(f.appRole))
		mustExec(t, conn, `INSERT INTO customers (email, score) VALUES ('fork@x', 1)`)
		mustExec(t, conn, `DELETE FROM orders`)
		_ = conn.Close(f.ctx)
	}
	if n := countRows(t, p1, "orders"); n != 50 {
		t.Fatalf("parent p1 has %d orders after fork writes, want 50", n)
	}
	if n := countRows(t, p2, "customers"); n != 30 {
		t.Fatalf("parent p2 has %d customers after fork writes, want 30", n)
	}

	// The registry and the cluster's record say which workspace each copy was made for.
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND state = 'ready'`, fork); n != 2 {
		t.Fatalf("%d ready registry rows, want 2", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_databases WHERE for_workspace = $1`, fork); n != 2 {
		t.Fatalf("%d managed database records for the fork, want 2", n)
	}
	// The immutable flag and the parent.
	if queryString(t, a.conn, `SELECT parent FROM dataenv.workspaces WHERE id = $1 AND is_fork`, fork) != ws {
		t.Fatal("fork row: not a fork of its parent")
	}
	// Nothing drops a copy from under the fork: its uses name the fork (drop_database also
	// refuses dataenv_ names outright), and the parent's uses name the fork's keep_original entry.
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_database_uses($1, $2) WHERE name IN ($3, $3 || '/shop')`, f.name, shop, fork); n != 2 {
		t.Fatalf("uses of the copy: %d rows naming the fork, want 2 (fork copy, datatable)", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_database_uses($1, $2) WHERE kind = 'datatable' AND name = $3`, f.name, p1, fork+"/shared"); n != 1 {
		t.Fatal("the parent database's uses do not list the fork's keep_original datatable")
	}
	f.mustFail(f.request(f.sql, `SELECT dataenv.drop_database($1, $2, true)`, f.name, p1), "in use by")
}
