package lock

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const workspaceLockSQL = `SELECT pg_catalog.pg_advisory_lock(dataenv.workspace_lock_class(), pg_catalog.hashtext($1))`

// WorkspaceLocks holds the advisory locks of workspace ids (dataenv.workspace_lock_class(),
// hashtext(id)) on a connection of its own, outside the pool: a handler holding them never
// competes with the lifecycle locks and the dispatcher for pooled connections, and closing the
// connection releases every lock whatever happens. Whatever creates, prepares or drops a
// workspace's effects holds its lock, so a drop never interleaves with work that would recreate
// what it removes. Locks of several ids are taken ancestors first.
type WorkspaceLocks struct {
	conn *pgx.Conn
	held map[string]bool
}

// Workspace connects and takes the lock of id.
func Workspace(ctx context.Context, pool *pgxpool.Pool, id string) (*WorkspaceLocks, error) {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
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
		return fmt.Errorf("lock workspace %q: %w", id, err)
	}
	w.held[id] = true
	return nil
}

// Close ends the session, releasing every lock it holds.
func (w *WorkspaceLocks) Close(ctx context.Context) {
	_ = w.conn.Close(context.WithoutCancel(ctx))
}

// WithWorkspace runs fn holding the lock of id.
func WithWorkspace(ctx context.Context, pool *pgxpool.Pool, id string, fn func() error) error {
	w, err := Workspace(ctx, pool, id)
	if err != nil {
		return err
	}
	defer w.Close(ctx)
	return fn()
}
