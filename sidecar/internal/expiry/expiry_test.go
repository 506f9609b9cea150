package expiry_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/expiry"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "expiry"})
		return err
	})
}

type counter struct{ n atomic.Int64 }

func (c *counter) ForkExpired() { c.n.Add(1) }

type fixture struct {
	t    *testing.T
	ctx  context.Context
	conn *pgx.Conn
	s    *expiry.Sweeper
	obs  *counter
}

// newFixture installs dataenv in a database of its own; no sidecar runs, so the requests the
// sweep files stay pending and are looked at as they are.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), obs: &counter{}}
	db := pg.CreateDatabase(t)
	f.conn = pg.Connect(t, db)
	if _, err := install.Install(f.ctx, f.conn, install.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(f.ctx, pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f.s = expiry.New(expiry.Config{Pool: pool, Observer: f.obs, Logger: slog.New(slog.DiscardHandler)})
	return f
}

// workspace records a workspace row as the sidecar's create_fork would (a fork when parent is
// set), expiring at expiresAt (SQL, "" for none).
func (f *fixture) workspace(id, parent, expiresAt string) {
	f.t.Helper()
	if parent == "" {
		testenv.MustExec(f.t, f.conn, `INSERT INTO dataenv.workspaces (id) VALUES ($1)`, id)
		return
	}
	if expiresAt == "" {
		expiresAt = "NULL"
	}
	testenv.MustExec(f.t, f.conn, `INSERT INTO dataenv.workspaces (id, is_fork, parent, created_by_request, expires_at)
		VALUES ($1, true, $2, $3, `+expiresAt+`)`, id, parent, uuid.New())
}

func (f *fixture) sweep() map[string]uuid.UUID {
	f.t.Helper()
	filed, err := f.s.Sweep(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]uuid.UUID{}
	for _, x := range filed {
		out[x.Fork] = x.Request
	}
	return out
}

// TestSweepFilesEachExpiredLeafOnce: expired forks without children get one drop_fork each
// (recorded with the fork's members, made by the sweep's role, cascade off); not expired,
// protected and parents of live forks are left; a second sweep files nothing while the drops are
// pending.
func TestSweepFilesEachExpiredLeafOnce(t *testing.T) {
	f := newFixture(t)
	f.workspace("r", "", "")
	f.workspace("r/leaf", "r", "now() - interval '1 minute'")
	f.workspace("r/later", "r", "now() + interval '1 hour'")
	f.workspace("r/never", "r", "")
	f.workspace("r/kept", "r", "now() - interval '1 minute'")
	testenv.MustExec(t, f.conn, `UPDATE dataenv.workspaces SET protected = true, protected_by = current_user WHERE id = 'r/kept'`)
	f.workspace("r/parent", "r", "now() - interval '1 minute'")
	f.workspace("r/parent/child", "r/parent", "now() + interval '1 hour'")
	testenv.MustExec(t, f.conn, `INSERT INTO dataenv.workspace_members (workspace, member) VALUES ('r/leaf', 'pg_monitor')`)

	filed := f.sweep()
	if len(filed) != 1 || filed["r/leaf"] == uuid.Nil {
		t.Fatalf("filed %v, want one drop for r/leaf", filed)
	}
	if f.obs.n.Load() != 1 {
		t.Fatalf("observer counted %d expirations", f.obs.n.Load())
	}
	var kind, status string
	var cascade, byMe, membersOK bool
	if err := f.conn.QueryRow(f.ctx, `SELECT r.kind, r.status, (r.args->>'cascade')::boolean, r.requested_by = current_user,
			e.members @> ARRAY[current_user, 'pg_monitor']::name[]
		FROM dataenv.requests r JOIN dataenv.fork_expirations e ON e.request_id = r.id WHERE r.id = $1`, filed["r/leaf"]).
		Scan(&kind, &status, &cascade, &byMe, &membersOK); err != nil {
		t.Fatal(err)
	}
	if kind != "drop_fork" || status != "pending" || cascade || !byMe || !membersOK {
		t.Fatalf("filed request: %s %s cascade %v by the sweep's role %v members recorded %v", kind, status, cascade, byMe, membersOK)
	}
	if again := f.sweep(); len(again) != 0 {
		t.Fatalf("a second sweep filed %v while the first drop is pending", again)
	}

	// The child goes (its row; its drop finished): the parent is next.
	testenv.MustExec(t, f.conn, `DELETE FROM dataenv.workspaces WHERE id = 'r/parent/child'`)
	testenv.MustExec(t, f.conn, `SELECT dataenv.bury_workspace('r/parent/child')`)
	if filed := f.sweep(); len(filed) != 1 || filed["r/parent"] == uuid.Nil {
		t.Fatalf("filed %v, want one drop for r/parent", filed)
	}
}

// TestSweepWaitsForAChildsDrop: a parent whose dropped child's drop_fork is still running (its
// cleanups unfinished, the tombstone there) is not filed until that drop is over.
func TestSweepWaitsForAChildsDrop(t *testing.T) {
	f := newFixture(t)
	f.workspace("r", "", "")
	f.workspace("r/p", "r", "now() - interval '1 minute'")
	f.workspace("r/p/c", "r/p", "now() - interval '2 minutes'")
	filed := f.sweep()
	if len(filed) != 1 || filed["r/p/c"] == uuid.Nil {
		t.Fatalf("filed %v, want the child's drop only", filed)
	}
	// The drop deleted the child's row and is still running.
	testenv.MustExec(t, f.conn, `UPDATE dataenv.requests SET status = 'running' WHERE id = $1`, filed["r/p/c"])
	testenv.MustExec(t, f.conn, `DELETE FROM dataenv.workspaces WHERE id = 'r/p/c'`)
	if filed := f.sweep(); len(filed) != 0 {
		t.Fatalf("filed %v while the child's drop runs", filed)
	}
	testenv.MustExec(t, f.conn, `UPDATE dataenv.requests SET status = 'succeeded', finished_at = now() WHERE id = $1`, filed["r/p/c"])
	if filed := f.sweep(); len(filed) != 1 || filed["r/p"] == uuid.Nil {
		t.Fatalf("filed %v, want the parent's drop", filed)
	}
}
