package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

func init() { RegisterWorker("skiplocked", runSkipLockedWorker) }

// skipLockedSchema is a table of the same shape as dataenv.requests (columns, defaults,
// unfinished index), an insert trigger that wakes workers and an outcome trigger that notifies
// the request ids exactly like dataenv's (once per statement, over its transition tables).
const skipLockedSchema = `
CREATE TABLE requests (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind             text NOT NULL,
    args             jsonb NOT NULL DEFAULT '{}'::jsonb,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    result           jsonb,
    error            text,
    steps            jsonb NOT NULL DEFAULT '[]'::jsonb,
    requested_by     name NOT NULL DEFAULT current_user,
    xact             xid8 NOT NULL DEFAULT pg_current_xact_id(),
    attempts         integer NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX requests_unfinished_idx ON requests (created_at) WHERE status IN ('pending', 'running');

CREATE FUNCTION requests_notify_new() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('bench_request_new', '');
    RETURN NULL;
END $$;
CREATE TRIGGER requests_notify_new AFTER INSERT ON requests
    FOR EACH ROW EXECUTE FUNCTION requests_notify_new();

CREATE FUNCTION requests_notify_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('bench_request_finished', n.id::text)
       FROM requests_new n JOIN requests_old o ON o.id = n.id
      WHERE n.status IN ('succeeded', 'failed', 'cancelled') AND o.status IS DISTINCT FROM n.status;
    RETURN NULL;
END $$;
CREATE TRIGGER requests_notify_finished AFTER UPDATE ON requests
    REFERENCING OLD TABLE AS requests_old NEW TABLE AS requests_new
    FOR EACH STATEMENT EXECUTE FUNCTION requests_notify_finished();`

// claimSQL takes up to $1 pending requests, oldest first, skipping rows other workers hold.
const claimSQL = `
SELECT id, kind, args FROM requests
 WHERE status = 'pending'
 ORDER BY created_at
 LIMIT $1
   FOR UPDATE SKIP LOCKED`

const doneSQL = `
UPDATE requests
   SET status = 'succeeded', result = '{"pong": true}', attempts = attempts + 1,
       started_at = $2, finished_at = clock_timestamp(), updated_at = clock_timestamp()
 WHERE id = ANY($1)`

const (
	skipLockedWorkers = 4   // worker connections
	skipLockedBatch   = 100 // rows claimed per transaction
)

// runSkipLockedWorker: one LISTEN connection pokes skipLockedWorkers loops; each loop, in one
// transaction, claims a batch FOR UPDATE SKIP LOCKED, runs the (no-op) handlers and marks the
// batch succeeded, until the queue is empty; then it waits for a poke (or 1 s).
func runSkipLockedWorker(ctx context.Context, dsn string, _ io.Writer) error {
	wake := make(chan struct{}, 1)
	lc, err := connect(ctx, dsn, appWorker)
	if err != nil {
		return err
	}
	defer lc.Close(context.WithoutCancel(ctx))
	if _, err := lc.Exec(ctx, `LISTEN bench_request_new`); err != nil {
		return err
	}
	var wg sync.WaitGroup
	for range skipLockedWorkers {
		conn, err := connect(ctx, dsn, appWorker)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close(context.WithoutCancel(ctx))
			skipLockedLoop(ctx, conn, wake)
		}()
	}
	for {
		if _, err := lc.WaitForNotification(ctx); err != nil {
			break
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	wg.Wait()
	return nil
}

func skipLockedLoop(ctx context.Context, conn *pgx.Conn, wake chan struct{}) {
	for ctx.Err() == nil {
		n, err := skipLockedBatchOnce(ctx, conn)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "skiplocked worker: %v\n", err)
			time.Sleep(100 * time.Millisecond)
		}
		if n == skipLockedBatch {
			continue
		}
		if n > 0 {
			select { // pass the wake-up on: more may have arrived while we worked
			case wake <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-time.After(time.Second):
		}
	}
}

func skipLockedBatchOnce(ctx context.Context, conn *pgx.Conn) (int, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, claimSQL, skipLockedBatch)
	if err != nil {
		return 0, err
	}
	started := time.Now()
	var ids [][16]byte
	for rows.Next() {
		var id [16]byte
		var kind string
		var args []byte
		if err := rows.Scan(&id, &kind, &args); err != nil {
			return 0, err
		}
		ids = append(ids, id) // the handler: a no-op
	}
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	if _, err := tx.Exec(ctx, doneSQL, ids, started); err != nil {
		return 0, err
	}
	return len(ids), tx.Commit(ctx)
}

// newSkipLockedTarget: INSERT ... RETURNING id in autocommit; completion = NOTIFY from the
// outcome trigger, as for dataenv.
func newSkipLockedTarget() *notifyTarget {
	return &notifyTarget{name: "LISTEN/NOTIFY + SKIP LOCKED", db: "bench_skiplocked", worker: "skiplocked",
		channel: "bench_request_finished", submitSQL: `INSERT INTO requests (kind) VALUES ('ping') RETURNING id::text`,
		table: "requests",
		setup: func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, skipLockedSchema); err != nil {
				return fmt.Errorf("create the SKIP LOCKED baseline's table: %w", err)
			}
			return nil
		}}
}
