package lifecycle_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestForkExpires: a fork created with expires_in shows its expiry in the workspace views,
// expires, and is gone; the drop was an ordinary drop_fork request, recorded, made by the
// sidecar's role, and visible to the fork's member (the request, its wait and the ledger view),
// but not to a stranger.
func TestForkExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stranger := e.newUser()
	ws := wsID("ws")
	fork := ws + "/f"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, e.member.name)
	e.fork(e.owner, ws, fork, "expires_in => '1 hour'")
	mustExec(t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, fork, e.member.name)
	if !testenv.Query[bool](t, e.member.conn, `SELECT expires_at IS NOT NULL FROM dataenv.workspace_lifecycle WHERE workspace = $1`, fork) {
		t.Fatal("workspace_lifecycle shows no expiry")
	}
	// Now due (the member is granted first, so that it is one of the fork's members when it goes).
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now())`, fork)
	e.waitGone(fork)

	ids := e.expiryRequests(fork)
	if len(ids) != 1 {
		t.Fatalf("fork %s: %d expiry drops filed, want 1", fork, len(ids))
	}
	id := ids[0]
	// The member waits on it (the workspace row goes before the drop's cleanups finish).
	if r := sidecartest.Wait(t, e.member.conn, id, 2*time.Minute); r.Status != "succeeded" {
		t.Fatalf("the member waits for the expiry drop: %s %s", r.Status, deref(r.Error))
	}
	var kind, status, by string
	var cascade bool
	if err := e.member.conn.QueryRow(e.ctx, `SELECT kind, status, requested_by, (args->>'cascade')::boolean FROM dataenv.requests WHERE id = $1`, id).
		Scan(&kind, &status, &by, &cascade); err != nil {
		t.Fatalf("the member reads the expiry drop: %v", err)
	}
	installer := testenv.QueryText(t, e.sql, `SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'dataenv'`)
	if kind != "drop_fork" || status != "succeeded" || by != installer || cascade {
		t.Fatalf("expiry drop: kind %s status %s requested_by %s cascade %v; want a succeeded drop_fork by %s without cascade", kind, status, by, cascade, installer)
	}
	var listed uuid.UUID
	var lstatus string
	if err := e.member.conn.QueryRow(e.ctx, `SELECT request_id, status FROM dataenv.fork_expiration_list WHERE fork = $1`, fork).Scan(&listed, &lstatus); err != nil {
		t.Fatalf("the member reads fork_expiration_list: %v", err)
	}
	if listed != id || lstatus != "succeeded" {
		t.Fatalf("fork_expiration_list: %s %s, want %s succeeded", listed, lstatus, id)
	}
	if n := testenv.Query[int](t, stranger.conn, `SELECT count(*) FROM dataenv.requests WHERE id = $1`, id); n != 0 {
		t.Fatal("a stranger sees the expiry drop")
	}
	if n := testenv.Query[int](t, stranger.conn, `SELECT count(*) FROM dataenv.fork_expiration_list`); n != 0 {
		t.Fatal("a stranger sees the expiration ledger")
	}
	// The parent (no expiry) stays.
	if !e.exists(ws) {
		t.Fatal("the parent was dropped")
	}
}

// TestExpiryShownAndCleared: the expiry is shown in dataenv.workspaces and
// dataenv.workspace_lifecycle; set_fork_expiry moves it (owner), clears it with NULL, and is
// refused to a member who does not own the fork.
func TestExpiryShownAndCleared(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	fork := ws + "/f"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	e.fork(e.owner, ws, fork, "'{}', '{}', '1 hour'")
	mustExec(t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, fork, e.member.name)
	if !testenv.Query[bool](t, e.member.conn, `SELECT expires_at > now() + interval '50 minutes' AND expires_at <= now() + interval '1 hour'
		FROM dataenv.workspace_lifecycle WHERE workspace = $1 AND NOT expired AND expiry_state IS NULL`, fork) {
		t.Fatal("workspace_lifecycle does not show the fork's expiry an hour ahead")
	}
	mustRefuse(t, e.member.conn, []string{"is not the owner"}, `SELECT dataenv.set_fork_expiry($1, now() + interval '2 hours')`, fork)
	mustRefuse(t, e.newUser().conn, []string{"no workspace"}, `SELECT dataenv.set_fork_expiry($1, NULL)`, fork)
	mustRefuse(t, e.owner.conn, []string{"not a fork"}, `SELECT dataenv.set_fork_expiry($1, now())`, ws)
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now() + interval '2 hours')`, fork)
	if !testenv.Query[bool](t, e.owner.conn, `SELECT expires_at > now() + interval '90 minutes' FROM dataenv.workspaces WHERE id = $1`, fork) {
		t.Fatal("set_fork_expiry did not move the expiry")
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, NULL)`, fork)
	if testenv.QueryText(t, e.owner.conn, `SELECT expires_at::text FROM dataenv.workspaces WHERE id = $1`, fork) != "" {
		t.Fatal("set_fork_expiry(NULL) did not clear the expiry")
	}
	mustRefuse(t, e.owner.conn, []string{"expires_in must be positive"}, `SELECT dataenv.create_fork($1, $2, expires_in => '-1 hour')`, ws, ws+"/neg")
}

// TestChildExpiresFirst: an expired fork whose child has not expired is kept until the child is
// gone; then it goes too. A sibling that expired later shows that sweeps ran meanwhile.
func TestChildExpiresFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	parent, child, sibling := ws+"/p", ws+"/p/c", ws+"/s"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	e.fork(e.owner, ws, parent, "expires_in => '1 hour'")
	e.fork(e.owner, parent, child, "expires_in => '1 hour'")
	e.fork(e.owner, ws, sibling, "expires_in => '1 hour'")
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now())`, parent)
	// The sibling expires after the parent: once a sweep dropped it, a sweep saw the parent expired.
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now())`, sibling)
	e.waitGone(sibling)
	if !e.exists(parent) || !e.exists(child) {
		t.Fatal("the parent or its unexpired child was dropped")
	}
	if n := len(e.expiryRequests(parent)); n != 0 {
		t.Fatalf("%d drops filed for a fork whose child has not expired", n)
	}
	if st := testenv.QueryText(t, e.owner.conn, `SELECT expiry_state FROM dataenv.workspace_lifecycle WHERE workspace = $1`, parent); st != "waiting for child forks" {
		t.Fatalf("expiry_state of the parent: %q", st)
	}
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now())`, child)
	e.waitGone(parent)
	if e.exists(child) {
		t.Fatal("the child outlived its parent")
	}
	c, p := e.expiryRequests(child), e.expiryRequests(parent)
	if len(c) != 1 || len(p) != 1 {
		t.Fatalf("drops filed: child %d, parent %d; want one each", len(c), len(p))
	}
	if !testenv.Query[bool](t, e.sql, `SELECT (SELECT finished_at FROM dataenv.requests WHERE id = $1) <= (SELECT filed_at FROM dataenv.fork_expirations WHERE request_id = $2)`, c[0], p[0]) {
		t.Fatal("the parent's drop was filed before the child's finished")
	}
}

// TestExpiryMovedAfterFiling: a drop filed for an expiry is refused when the fork's expiry was
// moved (or cleared) before it ran; the fork stays.
func TestExpiryMovedAfterFiling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	fork := ws + "/f"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	e.fork(e.owner, ws, fork, "expires_in => '1 hour'")
	// As the sweep files it, then moved in the same transaction (the sidecar sees both at once).
	tx, err := e.sql.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id uuid.UUID
	if err := tx.QueryRow(e.ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ('drop_fork',
		jsonb_build_object('fork', $1::text, 'cascade', false, 'expired_at', now() - interval '1 minute')) RETURNING id`, fork).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(e.ctx, `SELECT dataenv.set_fork_expiry($1, now() + interval '2 hours')`, fork); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.mustFail(id, "now expires at", "not dropped")
	if !e.exists(fork) {
		t.Fatal("the fork was dropped")
	}
}

// TestPolicy: an administrator's policy on a workspace applies to forks created under it and
// under its forks (the nearest policy up the chain): the default when expires_in is NULL, the
// maximum refusing a longer expires_in, a later set_fork_expiry and clearing the expiry. Only
// administrators set policies.
func TestPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ws := wsID("ws")
	fork, sub := ws+"/f", ws+"/f/sub"
	mustExec(t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, ws)
	mustRefuse(t, e.owner.conn, []string{"not a dataenv administrator"}, `SELECT dataenv.set_workspace_policy($1, '1 hour', '2 hours')`, ws)
	mustRefuse(t, e.sql, []string{"beyond max_fork_expiry"}, `SELECT dataenv.set_workspace_policy($1, '3 hours', '2 hours')`, ws)
	mustExec(t, e.sql, `SELECT dataenv.set_workspace_policy($1, '1 hour', '2 hours')`, ws)

	mustRefuse(t, e.owner.conn, []string{"beyond the maximum expiry", "02:00:00", "set_workspace_policy"},
		`SELECT dataenv.create_fork($1, $2, expires_in => '3 hours')`, ws, fork)
	e.fork(e.owner, ws, fork, "") // the default: an hour
	if !testenv.Query[bool](t, e.owner.conn, `SELECT expires_at > now() + interval '50 minutes' AND expires_at <= now() + interval '1 hour'
		FROM dataenv.workspaces WHERE id = $1`, fork) {
		t.Fatal("the policy's default expiry was not applied")
	}
	var from, def, maxExp string
	if err := e.owner.conn.QueryRow(e.ctx, `SELECT policy_from, default_fork_expiry::text, max_fork_expiry::text
		FROM dataenv.workspace_lifecycle WHERE workspace = $1`, fork).Scan(&from, &def, &maxExp); err != nil {
		t.Fatal(err)
	}
	if from != ws || def != "01:00:00" || maxExp != "02:00:00" {
		t.Fatalf("workspace_lifecycle of the fork: policy from %s default %s max %s", from, def, maxExp)
	}
	mustRefuse(t, e.owner.conn, []string{"beyond the maximum expiry"}, `SELECT dataenv.set_fork_expiry($1, now() + interval '3 hours')`, fork)
	mustRefuse(t, e.owner.conn, []string{"cannot be cleared"}, `SELECT dataenv.set_fork_expiry($1, NULL)`, fork)
	mustExec(t, e.owner.conn, `SELECT dataenv.set_fork_expiry($1, now() + interval '90 minutes')`, fork)
	// A fork of the fork: the nearest policy up the chain is ws's.
	mustRefuse(t, e.owner.conn, []string{"beyond the maximum expiry"}, `SELECT dataenv.create_fork($1, $2, expires_in => '3 hours')`, fork, sub)
	e.fork(e.owner, fork, sub, "expires_in => '30 minutes'")
	// Removing the policy lets new forks live without expiry.
	mustExec(t, e.sql, `SELECT dataenv.set_workspace_policy($1, NULL, NULL)`, ws)
	e.fork(e.owner, ws, ws+"/free", "")
	if testenv.QueryText(t, e.owner.conn, `SELECT expires_at::text FROM dataenv.workspaces WHERE id = $1`, ws+"/free") != "" {
		t.Fatal("a fork without policy got an expiry")
	}
}
