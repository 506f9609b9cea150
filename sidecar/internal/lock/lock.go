// Package lock holds dataenv's advisory locks in the control database.
//
// Keys are two int4s: a fixed class id per purpose (dataenv.lock_class(purpose) in SQL) and
// hashtext(resource). Both halves are always computed by the server, so the Go side and the SQL
// functions agree on the key by construction:
//
//	SELECT pg_advisory_lock(dataenv.lock_class('lifecycle'), hashtext($1))
//
// The lifecycle lock of a cluster serializes everything that changes which databases or roles exist
// on it, and every save of configuration naming them. SQL functions take it as a transaction lock
// (dataenv.lock_cluster_lifecycle, or XactLifecycle here); the sidecar's side effects take it as a
// session lock with Acquire, because CREATE/DROP DATABASE cannot run inside a transaction. A
// session lock lives on one pinned connection, which Held exposes so that the holder runs its
// control-database queries on it: a holder never needs a second pooled connection, so waiters
// that each hold a pooled connection cannot starve it.
package lock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ClassLifecycle is the purpose name of the per-cluster lifecycle lock.
const ClassLifecycle = "lifecycle"

// ClassSchemaTemplate is the purpose name of the per-datatable-entry lock held while its schema
// template is copied from, built or dropped (always taken before a lifecycle lock).
const ClassSchemaTemplate = "schema_template"

// ClassLakePins is the purpose name of the per-lake-namespace lock held while a fork's pin of the
// namespace is taken and while dataenv.maintain_lake decides and expires its snapshots.
const ClassLakePins = "lake_pins"

const (
	tryLockSQL = `SELECT pg_catalog.pg_try_advisory_lock(dataenv.lock_class($1), pg_catalog.hashtext($2))`
	lockSQL    = `SELECT pg_catalog.pg_advisory_lock(dataenv.lock_class($1), pg_catalog.hashtext($2))`
	unlockSQL  = `SELECT pg_catalog.pg_advisory_unlock(dataenv.lock_class($1), pg_catalog.hashtext($2))`
	xactSQL    = `SELECT pg_catalog.pg_advisory_xact_lock(dataenv.lock_class($1), pg_catalog.hashtext($2))`
)

// Held is a session advisory lock held on a pinned control-database connection.
type Held struct {
	conn     *pgxpool.Conn
	class    string
	resource string
	waited   time.Duration
}

// Acquire takes the session lock (class, resource) on a connection of pool. When the lock is
// busy it calls waiting (if not nil) once before blocking, so a request can record that it waits.
// Cancelling ctx abandons the wait; the connection is then closed, so no lock can outlive it.
func Acquire(ctx context.Context, pool *pgxpool.Pool, class, resource string, waiting func()) (*Held, error) {
	return acquire(ctx, pool, class, resource, waiting, nil)
}

// Read is a query made as soon as a lock is held, on the connection holding it: sent behind the
// try-lock, in the same round trip, when the lock is free (its rows are then used only if the lock
// was taken), made after the wait otherwise. Scan gets its row once, with the lock held.
type Read struct {
	SQL  string
	Args []any
	Scan func(pgx.Row) error
}

func acquire(ctx context.Context, pool *pgxpool.Pool, class, resource string, waiting func(), read *Read) (*Held, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s lock of %q: get a control connection: %w", class, resource, err)
	}
	start := time.Now()
	ok, readErr, err := tryLock(ctx, conn.Conn(), class, resource, read)
	if err != nil {
		discard(conn)
		return nil, fmt.Errorf("%s lock of %q: %w", class, resource, err)
	}
	if !ok {
		if waiting != nil {
			waiting()
		}
		if _, err := conn.Exec(ctx, lockSQL, class, resource); err != nil {
			// A cancelled wait may have raced with the grant: closing the session releases both.
			discard(conn)
			return nil, fmt.Errorf("wait for the %s lock of %q: %w", class, resource, err)
		}
		if read != nil {
			readErr = read.Scan(conn.QueryRow(ctx, read.SQL, read.Args...))
		}
	}
	held := &Held{conn: conn, class: class, resource: resource, waited: time.Since(start)}
	if readErr != nil {
		return nil, errors.Join(readErr, held.Release(ctx))
	}
	return held, nil
}

// tryLock tries the lock and, when it was free, makes read (if any) in the same round trip:
// readErr is read's answer, err the lock's or the connection's.
func tryLock(ctx context.Context, conn *pgx.Conn, class, resource string, read *Read) (ok bool, readErr, err error) {
	if read == nil {
		err = conn.QueryRow(ctx, tryLockSQL, class, resource).Scan(&ok)
		return ok, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(tryLockSQL, class, resource)
	b.Queue(read.SQL, read.Args...)
	br := conn.SendBatch(ctx, b)
	if err = br.QueryRow().Scan(&ok); err != nil {
		_ = br.Close()
		return false, nil, err
	}
	if !ok {
		// The read ran without the lock: whatever it gave is dropped (a broken connection shows
		// at the wait that follows).
		_ = br.Close()
		return false, nil, nil
	}
	readErr = read.Scan(br.QueryRow())
	// A read that failed in the server fails the batch's Close too: that is the read's answer,
	// not the lock's (taken: a session lock outlives the batch's implicit transaction).
	if cerr := br.Close(); readErr == nil {
		readErr = cerr
	}
	return true, readErr, nil
}

// TryAcquire takes the session lock (class, resource) if it is free; nil (and no error) when
// another session holds it.
func TryAcquire(ctx context.Context, pool *pgxpool.Pool, class, resource string) (*Held, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s lock of %q: get a control connection: %w", class, resource, err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, tryLockSQL, class, resource).Scan(&ok); err != nil {
		discard(conn)
		return nil, fmt.Errorf("%s lock of %q: %w", class, resource, err)
	}
	if !ok {
		conn.Release()
		return nil, nil
	}
	return &Held{conn: conn, class: class, resource: resource}, nil
}

// Lifecycle takes the lifecycle lock of cluster; see Acquire.
func Lifecycle(ctx context.Context, pool *pgxpool.Pool, cluster string, waiting func()) (*Held, error) {
	return Acquire(ctx, pool, ClassLifecycle, cluster, waiting)
}

// Conn is the pinned connection that holds the lock. Use it for control-database work done under
// the lock; do not close it and do not use it after Release.
func (h *Held) Conn() *pgx.Conn { return h.conn.Conn() }

// Waited is how long Acquire waited for the lock.
func (h *Held) Waited() time.Duration { return h.waited }

// Release unlocks and returns the connection to its pool. It always leaves the lock released: if
// the unlock fails (broken connection, aborted state), the connection is closed instead, which
// ends the session and its locks. Calling Release twice is a no-op.
func (h *Held) Release(ctx context.Context) error {
	if h == nil || h.conn == nil {
		return nil
	}
	conn := h.conn
	h.conn = nil
	var unlocked bool
	err := conn.QueryRow(context.WithoutCancel(ctx), unlockSQL, h.class, h.resource).Scan(&unlocked)
	if err == nil && !unlocked {
		err = errors.New("the lock was not held")
	}
	if err != nil {
		discard(conn)
		return fmt.Errorf("release the %s lock of %q (its connection was closed): %w", h.class, h.resource, err)
	}
	conn.Release()
	return nil
}

// With runs fn holding the session lock (class, resource) and always releases it.
func With(ctx context.Context, pool *pgxpool.Pool, class, resource string, waiting func(),
	fn func(ctx context.Context, held *Held) error) error {
	return WithRead(ctx, pool, class, resource, waiting, nil, fn)
}

// WithRead is With with read (may be nil) made as soon as the lock is held, before fn (see Read).
// An error of read's is returned, the lock released, and fn not called.
func WithRead(ctx context.Context, pool *pgxpool.Pool, class, resource string, waiting func(), read *Read,
	fn func(ctx context.Context, held *Held) error) (err error) {
	held, err := acquire(ctx, pool, class, resource, waiting, read)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := held.Release(ctx); rerr != nil && err == nil {
			err = rerr
		}
	}()
	return fn(ctx, held)
}

// XactLifecycle takes the lifecycle lock of cluster until tx ends: what the SQL functions that
// save configuration do (dataenv.lock_cluster_lifecycle).
func XactLifecycle(ctx context.Context, tx pgx.Tx, cluster string) error {
	if _, err := tx.Exec(ctx, xactSQL, ClassLifecycle, cluster); err != nil {
		return fmt.Errorf("lifecycle lock of %q: %w", cluster, err)
	}
	return nil
}

// QueueXactLifecycle queues XactLifecycle's statement in b, a batch a transaction sends; its
// result is read in turn (BatchResults.Exec).
func QueueXactLifecycle(b *pgx.Batch, cluster string) {
	b.Queue(xactSQL, ClassLifecycle, cluster)
}

// discard closes a pooled connection's session (and with it every session lock it held) and
// drops it from the pool.
func discard(conn *pgxpool.Conn) {
	c := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
