package forks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

// resetSetup is a workspace with a datatable per mode (c full_copy, s schema_only, k
// keep_original) and a fork of it; then the parent and the fork each change.
type resetSetup struct {
	a              user
	parent         string // the parent's database
	ws, fork       string
	copyC, copyS   string
	role, password string // the fork's workspace role on the cluster, from connection_info
}

func (f *fixture) resetSetup(t *testing.T) resetSetup {
	t.Helper()
	r := resetSetup{a: f.newUser(), parent: f.parentDB("p", 5), ws: wsID("ws"), fork: wsID("fork")}
	mustExec(t, r.a.conn, `SELECT dataenv.create_workspace($1)`, r.ws)
	f.grantDatabase(r.a, f.name, r.parent)
	for _, dt := range []string{"c", "s", "k"} {
		mustExec(t, r.a.conn, `SELECT dataenv.add_datatable($1, $2, $3, $4)`, r.ws, dt, f.name, r.parent)
	}
	f.mustSucceed(f.request(r.a.conn, `SELECT dataenv.create_fork($1, $2, '{"c": "full_copy", "s": "schema_only"}')`, r.ws, r.fork))
	f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", r.ws)) // settled before anything is compared
	r.copyC, r.copyS = names.ForkDatabase(r.fork, "c"), names.ForkDatabase(r.fork, "s")
	r.role = queryString(t, r.a.conn, `SELECT role FROM dataenv.connection_info($1) WHERE datatable = 'c'`, r.fork)
	r.password = queryString(t, r.a.conn, `SELECT dataenv.connection_password($1)`, r.fork)

	// The fork changes its copies, as its own role (what its members' tools connect as).
	fc := r.connect(t, r.copyC)
	mustExec(t, fc, `INSERT INTO public.customers (email, score) VALUES ('fork@x', 1); ALTER TABLE public.orders ADD COLUMN note text`)
	_ = fc.Close(f.ctx)
	fs := r.connect(t, r.copyS)
	mustExec(t, fs, `CREATE TABLE public.fork_only (x int)`)
	_ = fs.Close(f.ctx)
	// The parent changes after the fork was made.
	pc := f.pg.Connect(t, r.parent)
	mustExec(t, pc, `SET ROLE `+ident(f.appRole)+`;
		INSERT INTO customers (email, score) VALUES ('parent-later@x', 7);
		CREATE TABLE parent_later (id int PRIMARY KEY); INSERT INTO parent_later VALUES (1), (2)`)
	_ = pc.Close(f.ctx)
	waitIdle(t, external.Connect(t, "postgres"), r.parent) // idle: the full_copy may be a TEMPLATE copy
	return r
}

// connect connects to db as the fork's role, with the connection string connection_info gave.
func (r resetSetup) connect(t *testing.T, db string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), external.DSNAs(r.role, r.password, db))
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", db, r.role, err)
	}
	return conn
}

// stagingNames are the names a reset request builds its new copies under (c and s), as
// sidecar/internal/workspace derives them.
func stagingNames(id string) []string {
	var out []string
	for _, dt := range []string{"c", "s"} {
		h := sha256.Sum256([]byte(id + "/" + dt))
		out = append(out, names.ForkPrefix+"reset_"+hex.EncodeToString(h[:12]))
	}
	return out
}

// checkReset checks that the fork's copies are the parent's current state under the same
// names, owned by the fork's role, registered once by request id, with nothing staged left.
func (f *fixture) checkReset(t *testing.T, r resetSetup, id string) {
	t.Helper()
	c := r.connect(t, r.copyC)
	defer c.Close(f.ctx)
	if n := queryInt(t, c, `SELECT count(*) FROM public.customers WHERE email IN ('fork@x')`); n != 0 {
		t.Errorf("the fork's row is still in %s after the reset", r.copyC)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM public.customers`); n != 6 {
		t.Errorf("%s has %d customers after the reset, want the parent's 6", r.copyC, n)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM public.parent_later`); n != 2 {
		t.Errorf("%s has %d rows of the parent's later table, want 2", r.copyC, n)
	}
	if n := queryInt(t, c, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'orders' AND column_name = 'note'`); n != 0 {
		t.Errorf("the fork's column is still in %s", r.copyC)
	}
	if s, ps := schemaOf(t, r.copyS), schemaOf(t, r.parent); s != ps {
		t.Errorf("the schema_only copy's schema after the reset differs from the parent's:\n%s\n---\n%s", s, ps)
	}
	if n := countRows(t, r.copyS, "customers"); n != 0 {
		t.Errorf("the schema_only copy has %d rows", n)
	}
	for _, db := range []string{r.copyC, r.copyS} {
		if owner := queryString(t, f.sql, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, db); owner != "" {
			t.Fatalf("the copy %s is on the control cluster", db)
		}
		ext := external.Connect(t, db)
		if owner := queryString(t, ext, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()`); owner != r.role {
			t.Errorf("%s is owned by %s after the reset, want the fork's role %s", db, owner, r.role)
		}
		if n := queryInt(t, ext, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND pg_get_userbyid(c.relowner) <> $1`, r.role); n != 0 {
			t.Errorf("%s: %d relations not owned by %s", db, n, r.role)
		}
		_ = ext.Close(f.ctx)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, r.fork); n != 2 {
		t.Errorf("%d registry rows of the fork, want 2", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND state = 'ready'
		AND created_by_request = $2::uuid AND database IN ($3, $4)`, r.fork, id, r.copyC, r.copyS); n != 2 {
		t.Errorf("%d ready registry rows of the reset for the copies' names, want 2", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_databases WHERE for_workspace = $1`, r.fork); n != 2 {
		t.Errorf("%d database records of the fork, want 2", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_databases WHERE for_workspace = $1
		AND created_by_request = $2::uuid AND name IN ($3, $4)`, r.fork, id, r.copyC, r.copyS); n != 2 {
		t.Errorf("the records of the copies are not the reset's")
	}
	ext := external.Connect(t, "postgres")
	defer ext.Close(f.ctx)
	if n := queryInt(t, ext, `SELECT count(*) FROM pg_database WHERE datname = ANY($1) OR datname = 'dataenv_tmp_' || replace($2, '-', '')`,
		stagingNames(id), id); n != 0 {
		t.Errorf("%d staging databases left after the reset", n)
	}
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.workspace_role_databases WHERE workspace = $1 AND database LIKE 'dataenv\_fork\_reset\_%'`, r.fork); n != 0 {
		t.Errorf("the fork's role still records %d staging databases", n)
	}
	// keep_original still shares the parent's database, which kept its own rows.
	if db := queryString(t, r.a.conn, `SELECT database FROM dataenv.connection_info($1) WHERE datatable = 'k'`, r.fork); db != r.parent {
		t.Errorf("keep_original datatable k names %s after the reset, want the parent's %s", db, r.parent)
	}
	if n := countRows(t, r.parent, "customers"); n != 6 {
		t.Errorf("the parent has %d customers, want 6", n)
	}
	if ready := queryString(t, r.a.conn, `SELECT string_agg(datatable || ':' || ready, ',' ORDER BY datatable) FROM dataenv.connection_info($1)`, r.fork); ready != "c:true,k:true,s:true" {
		t.Errorf("connection_info after the reset: %s", ready)
	}
}

// TestResetForkRenewsCopiesUnderTheSameNames: after changes in the parent and in the fork,
// reset_fork gives the fork the parent's current state under the same database names (the
// connection string keeps working), ends the session open on a copy and counts it.
func TestResetForkRenewsCopiesUnderTheSameNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.resetSetup(t)
	held := r.connect(t, r.copyC)
	defer held.Close(context.Background())
	mustExec(t, held, `SELECT 1`)
	oid := queryInt(t, external.Connect(t, "postgres"), `SELECT oid::int FROM pg_database WHERE datname = $1`, r.copyC)

	id := f.request(r.a.conn, `SELECT dataenv.reset_fork($1)`, r.fork)
	var res struct {
		SessionsEnded int `json:"sessions_ended"`
		Datatables    []struct {
			Datatable     string `json:"datatable"`
			Database      string `json:"database"`
			Status        string `json:"status"`
			SessionsEnded int    `json:"sessions_ended"`
		} `json:"datatables"`
	}
	decode(t, f.mustSucceed(id).result, &res)
	if res.SessionsEnded != 1 {
		t.Errorf("sessions_ended %d, want 1 (the session held on %s)", res.SessionsEnded, r.copyC)
	}
	got := map[string]string{}
	for _, d := range res.Datatables {
		got[d.Datatable] = d.Database + " " + d.Status
		if d.Datatable == "c" && d.SessionsEnded != 1 {
			t.Errorf("datatable c: sessions_ended %d, want 1", d.SessionsEnded)
		}
	}
	if got["c"] != r.copyC+" renewed" || got["s"] != r.copyS+" renewed" || got["k"] != r.parent+" unchanged" {
		t.Errorf("result datatables %v", got)
	}
	if err := sqlErr(held, `SELECT 1`); err == nil {
		t.Error("the session held on the copy still works after the reset")
	}
	if n := queryInt(t, external.Connect(t, "postgres"), `SELECT oid::int FROM pg_database WHERE datname = $1`, r.copyC); n == oid {
		t.Error("the copy is the same database as before the reset")
	}
	f.checkReset(t, r, id)

	// A second reset renews them again (another request), and the fork can still be dropped.
	fc := r.connect(t, r.copyC)
	mustExec(t, fc, `DELETE FROM public.orders`)
	_ = fc.Close(f.ctx)
	id2 := f.request(r.a.conn, `SELECT dataenv.reset_fork($1)`, r.fork)
	f.mustSucceed(id2)
	if n := countRows(t, r.copyC, "orders"); n != 5 {
		t.Errorf("after a second reset the copy has %d orders, want the parent's 5", n)
	}
	f.checkReset(t, r, id2)
	f.mustSucceed(f.request(r.a.conn, `SELECT dataenv.drop_fork($1)`, r.fork))
	for _, db := range []string{r.copyC, r.copyS} {
		if databaseExists(t, db) {
			t.Errorf("%s is left after drop_fork of a reset fork", db)
		}
	}
	if !databaseExists(t, r.parent) {
		t.Fatal("the parent's database is gone")
	}
}

// TestResetForkRefusals: a root workspace, a fork with child forks (named), and someone who is not
// the fork's owner are refused, with nothing changed.
func TestResetForkRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.parentDB("p", 3)
	ws, fork, child := wsID("ws"), wsID("fork"), wsID("child")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, ws, f.name, p)
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "full_copy"}')`, ws, fork))
	f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2)`, fork, child))

	for _, c := range []struct{ ws, want string }{
		{ws, "is not a fork"},
		{fork, "has child forks (" + child + ")"},
		{"", "reset_fork"},
	} {
		err := sqlErr(a.conn, `SELECT dataenv.reset_fork($1)`, c.ws)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reset_fork(%q): %v, want an error with %q", c.ws, err, c.want)
		}
	}
	b := f.newUser()
	mustExec(t, a.conn, `SELECT dataenv.grant_workspace($1, $2)`, child, b.name)
	if err := sqlErr(b.conn, `SELECT dataenv.reset_fork($1)`, child); err == nil || !strings.Contains(err.Error(), "not the owner") {
		t.Errorf("reset_fork by a member who is not the owner: %v", err)
	}
	// The sidecar checks again under the fork's lock: a row that skipped the validator.
	var id string
	err := pgx.BeginFunc(f.ctx, f.sql, func(tx pgx.Tx) error {
		if _, err := tx.Exec(f.ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		return tx.QueryRow(f.ctx, `INSERT INTO dataenv.requests (kind, args, requested_by)
			VALUES ('reset_fork', jsonb_build_object('fork', $1::text), $2) RETURNING id::text`, fork, a.name).Scan(&id)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.mustFail(id, "has child forks ("+child+")")
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1 AND created_by_request = $2::uuid`, fork, id); n != 0 {
		t.Error("the refused reset registered a copy")
	}
}

// TestCrashInResetFork kills the sidecar (SIGKILL) at each point of a reset: while the new copy
// is made under its staging name, after it is ready, after the old copy is dropped, after the
// rename on the cluster (its record not moved yet), before the lakes. After a restart the request
// finishes once: the copies are the parent's current state under their names, registered once,
// nothing staged left.
func TestCrashInResetFork(t *testing.T) {
	for _, point := range []string{"fork.after_create_database", "fork.after_load", "fork.reset.after_staging",
		"fork.reset.after_old_drop", "cluster.rename_database.after_rename", "fork.reset.before_lakes"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			r := f.resetSetup(t)
			// Armed only now: create_fork passes the copy's crash points too.
			if err := f.sidecar.Stop(time.Minute); err != nil {
				t.Logf("stop: %v", err)
			}
			env := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
			f.sidecar = f.startSidecar(env...)
			id := f.request(r.a.conn, `SELECT dataenv.reset_fork($1)`, r.fork)
			waitExit(t, f.sidecar)
			f.sidecar = f.startSidecar(env...) // the marker keeps it from dying twice
			f.mustSucceed(id)
			f.checkReset(t, r, id)
			if a := queryInt(t, f.sql, `SELECT attempts FROM dataenv.requests WHERE id = $1::uuid`, id); a < 2 {
				t.Fatalf("attempts %d: the crash did not happen inside the handler", a)
			}
		})
	}
}

// TestResetForkRefusedLeavesTheForkAsItWas: a session the cluster's admin may not end (a
// superuser's) on a copy refuses the reset before the old copy is dropped; the fork keeps its
// data, the staging copy is dropped, and once the session is gone the reset succeeds.
func TestResetForkRefusedLeavesTheForkAsItWas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.resetSetup(t)
	super := external.Connect(t, r.copyC)
	mustExec(t, super, `SELECT 1`)
	failed := f.request(r.a.conn, `SELECT dataenv.reset_fork($1)`, r.fork)
	f.mustFail(failed, "cannot be ended")
	if err := sqlErr(super, `SELECT 1`); err != nil {
		t.Fatalf("the superuser's session was ended: %v", err)
	}
	_ = super.Close(f.ctx)
	c := r.connect(t, r.copyC)
	if n := queryInt(t, c, `SELECT count(*) FROM public.customers WHERE email = 'fork@x'`); n != 1 {
		t.Errorf("the refused reset changed the fork's copy")
	}
	_ = c.Close(f.ctx)
	if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.fork_copies WHERE workspace = $1`, r.fork); n != 2 {
		t.Errorf("%d registry rows after the refused reset, want the 2 copies", n)
	}
	ext := external.Connect(t, "postgres")
	if n := queryInt(t, ext, `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, stagingNames(failed)); n != 0 {
		t.Errorf("%d staging databases left by the refused reset", n)
	}
	waitIdle(t, ext, r.copyC)
	id := f.request(r.a.conn, `SELECT dataenv.reset_fork($1)`, r.fork)
	f.mustSucceed(id)
	f.checkReset(t, r, id)
}
