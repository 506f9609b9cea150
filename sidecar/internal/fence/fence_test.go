package fence_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "fence"})
		return err
	})
}

func TestNamesRoundTripWithin63Bytes(t *testing.T) {
	inst, req := uuid.New(), uuid.New()
	a := &fence.Attempt{Instance: inst, Request: req, Number: 999_999_999}
	name := a.AppName()
	if len(name) > 63 {
		t.Fatalf("%q is %d bytes", name, len(name))
	}
	tag, ok := fence.Parse(name)
	if !ok || tag.Instance != fence.InstanceTag(inst) || tag.Request != req || tag.Attempt != 999_999_999 || tag.Role != "" {
		t.Fatalf("Parse(%q) = %+v, %v", name, tag, ok)
	}
	tag, ok = fence.Parse(fence.SessionName(inst, fence.RoleControl))
	if !ok || tag.Role != fence.RoleControl || tag.Request != uuid.Nil {
		t.Fatalf("session name parsed as %+v, %v", tag, ok)
	}
	for _, bad := range []string{"", "dataenv", "dataenv-sidecar", "dataenv/xyz/control", "dataenv/0123456789ab/zz/1",
		"dataenv/0123456789ab/" + strings.Repeat("0", 32) + "/-1", "psql"} {
		if _, ok := fence.Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	ctx := fence.WithAttempt(context.Background(), a)
	if fence.FromContext(ctx) != a || fence.AppName(ctx, "x") != name || fence.AppName(context.Background(), "x") != "x" {
		t.Fatal("the attempt does not travel in the context")
	}
}

// session opens a connection named name that runs a long pg_sleep in the background.
func session(t *testing.T, db, name string) (pid int32, done <-chan error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	pid = int32(conn.PgConn().PID())
	ch := make(chan error, 1)
	go func() {
		_, err := conn.Exec(context.Background(), `SELECT pg_sleep(600)`)
		ch <- err
	}()
	return pid, ch
}

// TestTerminateEndsEarlierAttemptsAndOldLeaders: the sessions of earlier attempts of the request
// and of instances that no longer lead end; the current attempt's, another request's, and
// everything that is not dataenv's stay.
func TestTerminateEndsEarlierAttemptsAndOldLeaders(t *testing.T) {
	t.Parallel()
	db := pg.CreateDatabase(t)
	me, old, req, other := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	name := func(inst, r uuid.UUID, n int) string {
		return (&fence.Attempt{Instance: inst, Request: r, Number: n}).AppName()
	}
	_, earlier := session(t, db, name(old, req, 1))
	_, oldControl := session(t, db, fence.SessionName(old, fence.RoleControl))
	current, _ := session(t, db, name(me, req, 3))
	otherReq, _ := session(t, db, name(me, other, 1))
	foreign, _ := session(t, db, "psql")
	conn := pg.Connect(t, db)
	n, err := fence.Terminate(context.Background(), conn, db,
		fence.Victims{Instances: map[string]bool{fence.InstanceTag(old): true}, Request: req, Below: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("ended %d sessions, want 2", n)
	}
	for what, ch := range map[string]<-chan error{"earlier attempt": earlier, "old leader's control session": oldControl} {
		select {
		case err := <-ch:
			if err == nil {
				t.Errorf("%s: its statement finished instead of being ended", what)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s still running", what)
		}
	}
	alive := testenv.Query[int](t, conn, `SELECT count(*)::int FROM pg_stat_activity WHERE pid = ANY($1)`,
		[]int32{current, otherReq, foreign})
	if alive != 3 {
		t.Fatalf("%d of the 3 sessions that must stay are alive", alive)
	}
}

// A first attempt with no former leader has nothing to fence (no connection is opened for it);
// an earlier attempt or a former leader does.
func TestVictimsNone(t *testing.T) {
	req := uuid.New()
	for _, c := range []struct {
		v    fence.Victims
		none bool
	}{
		{fence.Victims{Request: req, Below: 1}, true},
		{fence.Victims{Request: req, Below: 2}, false},
		{fence.Victims{Request: req, Below: 1, Instances: map[string]bool{"abc": true}}, false},
		{fence.Victims{}, true},
	} {
		if got := c.v.None(); got != c.none {
			t.Errorf("%+v: None() = %v, want %v", c.v, got, c.none)
		}
		// None must never hide a session Match would end.
		if c.none && c.v.Match(fence.Tag{Instance: "abc", Request: req, Attempt: 1}) {
			t.Errorf("%+v: None() but it matches attempt 1", c.v)
		}
	}
}
