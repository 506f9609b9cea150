package lock

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	workspaceLockSQL = `SELECT pg_catalog.pg_advisory_lock(dataenv.workspace_lock_class(), pg_catalog.hashtext($1))`
	// unlockAllSQL ends a holder's turn on a session before it goes back to the pool: workspace
	// sessions hold nothing but workspace locks.
	unlockAllSQL = `SELECT pg_catalog.pg_advisory_unlock_all()`
)

// WorkspaceSessions are the control-database sessions workspace locks are held on: a pool of
// their own, apart from the control pool, so that a handler holding a workspace lock never
// competes with the lifecycle locks and the dispatcher for pooled connections. A session goes
// back to this pool only once pg_advisory_unlock_all has answered on it; whenever anything went
// wrong on it (a failed or cancelled lock, a failed unlock) it is closed instead, which releases
// whatever it held. Keeping sessions saves every workspace request a new connection (its
// authentication and backend start) on its path.
type WorkspaceSessions struct {
	pool *pgxpool.Pool
}

// workspaceIdle is how long an unused workspace-lock session is kept.
const workspaceIdle = time.Minute

// NewWorkspaceSessions makes the pool of workspace-lock sessions from the control pool's
// settings (the same server, role and session settings). It has no bound of its own: as many
// sessions are open at once as handlers hold workspace locks, as when each opened its own; a bound
// could make a handler that holds one lock wait forever for a session to take another.
func NewWorkspaceSessions(control *pgxpool.Pool) (*WorkspaceSessions, error) {
	cfg := control.Config()
	cfg.MinConns, cfg.MaxConns = 0, math.MaxInt32
	cfg.MaxConnIdleTime = workspaceIdle
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open the workspace-lock sessions: %w", err)
	}
	return &WorkspaceSessions{pool: pool}, nil
}

// Close closes the sessions, waiting for those in use to be let go (as pgxpool's Close does).
func (s *WorkspaceSessions) Close() { s.pool.Close() }

// WorkspaceLocks holds the advisory locks of workspace ids (dataenv.workspace_lock_class(),
// hashtext(id)) on one session of WorkspaceSessions. Whatever creates, prepares or drops a
// workspace's effects holds its lock, so a drop never interleaves with work that would recreate
// what it removes. Locks of several ids are taken ancestors first.
type WorkspaceLocks struct {
	conn   *pgxpool.Conn
	held   map[string]bool
	broken bool // a statement failed on conn: closed, not reused
}

// Workspace takes the lock of id on a session of s.
func (s *WorkspaceSessions) Workspace(ctx context.Context, id string) (*WorkspaceLocks, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock workspace %q: connect: %w", id, err)
	}
	w := &WorkspaceLocks{conn: conn, held: map[string]bool{}}
	if err := w.Also(ctx, id); err != nil {
		w.Close(ctx)
		return nil, err
	}
	return w, nil
}

// Also takes the lock of one more id on the same session (a no-op when held already).
func (w *WorkspaceLocks) Also(ctx context.Context, id string) error {
	if w.held[id] {
		return nil
	}
	if _, err := w.conn.Exec(ctx, workspaceLockSQL, id); err != nil {
		w.broken = true
		return fmt.Errorf("lock workspace %q: %w", id, err)
	}
	w.held[id] = true
	return nil
}

// workspaceUnlockWait bounds the unlock that hands a session back; past it the session is
// closed, which releases its locks as surely.
const workspaceUnlockWait = 5 * time.Second

// Close releases every lock the session holds: unlocked and handed back to the pool, or closed.
func (w *WorkspaceLocks) Close(ctx context.Context) {
	if !w.broken {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), workspaceUnlockWait)
		_, err := w.conn.Exec(uctx, unlockAllSQL)
		cancel()
		if err == nil {
			w.conn.Release()
			return
		}
	}
	_ = w.conn.Hijack().Close(context.WithoutCancel(ctx))
}
