package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
)

// holdLeaderLock makes instance the leader of the fixture's installation, as the daemon does
// (the leader lock held by a session named after the instance), so that its attempts may fence.
func (f *fixture) holdLeaderLock(instance uuid.UUID) {
	f.t.Helper()
	cfg, err := pgx.ParseConfig(f.controlDSN)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = fence.SessionName(instance, fence.RoleLeader)
	conn, err := pgx.ConnectConfig(f.ctx, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(f.ctx, `SELECT pg_advisory_lock(dataenv.lock_class('leader'), hashtext(current_database()))`); err != nil {
		f.t.Fatal(err)
	}
}

// Connections as a workspace role serve an attempt of a request like admin connections do: they
// carry the attempt's application_name, and the next attempt's first workspace-role connection
// ends the earlier attempt's session (a DuckDB job's catalog session, say) before it returns.
func TestWorkspaceConnectionsAreNamedAndFenced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.workspace("prod")
	inst, req := uuid.New(), uuid.New()
	f.holdLeaderLock(inst)
	first := &fence.Attempt{Instance: inst, Request: req, Number: 1}
	earlier, err := f.admin.ConnectWorkspace(fence.WithAttempt(f.ctx, first), f.name, "prod", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer earlier.Close(context.Background())
	if got := queryString(t, earlier, `SELECT current_setting('application_name')`); got != first.AppName() {
		t.Fatalf("the first attempt's workspace session is named %q, want %q", got, first.AppName())
	}
	ended := make(chan error, 1)
	go func() {
		_, err := earlier.Exec(context.Background(), `SELECT pg_sleep(600)`)
		ended <- err
	}()
	second := &fence.Attempt{Instance: inst, Request: req, Number: 2}
	lp, err := f.admin.WorkspaceLibpq(fence.WithAttempt(f.ctx, second), f.name, "prod", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the earlier attempt's statement finished instead of being ended")
		}
	case <-time.After(time.Minute):
		t.Fatal("the earlier attempt's workspace session survived the next attempt's fence")
	}
	want := "PGAPPNAME=" + second.AppName()
	found := false
	for _, kv := range lp.Env {
		found = found || kv == want
	}
	if !found {
		t.Fatalf("the second attempt's libpq environment lacks %s", want)
	}
}

// A workspace's libpq settings are given only to an attempt of the leader, and only for a
// workspace that exists: the fence's leader check and the workspace's read share a round trip,
// and neither answer is lost to the other.
func TestWorkspaceLibpqChecksTheLeaderAndTheWorkspace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.workspace("prod")
	leader, deposed := uuid.New(), uuid.New()
	f.holdLeaderLock(leader)
	att := func(inst uuid.UUID) context.Context {
		return fence.WithAttempt(f.ctx, &fence.Attempt{Instance: inst, Request: uuid.New(), Number: 1})
	}
	if lp, err := f.admin.WorkspaceLibpq(att(deposed), f.name, "prod", "postgres"); !errors.Is(err, fence.ErrNotLeader) {
		lp.Close()
		t.Fatalf("an attempt of an instance that does not lead: %v, want ErrNotLeader", err)
	}
	if lp, err := f.admin.WorkspaceLibpq(att(leader), f.name, "nope", "postgres"); err == nil || !strings.Contains(err.Error(), `no workspace named "nope"`) {
		lp.Close()
		t.Fatalf("a workspace that does not exist: %v", err)
	}
	lp, err := f.admin.WorkspaceLibpq(att(leader), f.name, "prod", "postgres")
	if err != nil {
		t.Fatal(err)
	}
	lp.Close()
}
