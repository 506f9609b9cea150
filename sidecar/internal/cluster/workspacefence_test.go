package cluster_test

import (
	"context"
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
