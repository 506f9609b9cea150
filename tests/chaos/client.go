package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// reqRow is a request row as the harness reads it back.
type reqRow struct {
	ID         uuid.UUID
	Kind       string
	Status     string
	Result     []byte
	Error      *string
	Attempts   int
	CreatedAt  time.Time
	FinishedAt *time.Time
}

func (r reqRow) final() bool {
	return r.Status == "succeeded" || r.Status == "failed" || r.Status == "cancelled"
}

func (r reqRow) errText() string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

const rowSQL = `SELECT id, kind, status, result, error, attempts, created_at, finished_at FROM dataenv.requests WHERE id = $1`

func scanRow(row pgx.Row) (reqRow, error) {
	var r reqRow
	err := row.Scan(&r.ID, &r.Kind, &r.Status, &r.Result, &r.Error, &r.Attempts, &r.CreatedAt, &r.FinishedAt)
	return r, err
}

// retry runs fn until it succeeds, fails with a harness error (not a lost connection or a
// restarting server), or ctx ends. The harness lives through the faults it injects.
func retry(ctx context.Context, fn func(ctx context.Context) error) error {
	backoff := 20 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !retriable(err) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// retriable: the harness's own connection broke or the server is restarting.
func retriable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "57", "08", "53", "40":
			return true
		}
		return pgErr.Code == "55000" // object not in prerequisite state (recovery)
	}
	return !errors.Is(err, pgx.ErrNoRows)
}

// issue inserts a request with an id of the harness's choosing, so that a retry after a lost
// connection cannot make a second request. It returns the id.
func (h *harness) issue(ctx context.Context, kind string, args map[string]any) (uuid.UUID, error) {
	id := uuid.New()
	raw, _ := json.Marshal(args)
	err := retry(ctx, func(ctx context.Context) error {
		_, err := h.pool.Exec(ctx, `INSERT INTO dataenv.requests (id, kind, args) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, id, kind, raw)
		return err
	})
	if err != nil {
		return id, fmt.Errorf("request %s %s: %w", kind, raw, err)
	}
	return id, nil
}

// await returns the request once it is finished; it keeps waiting through restarts until ctx
// ends (then the row as it stands, and ctx's error).
func (h *harness) await(ctx context.Context, id uuid.UUID) (reqRow, error) {
	var last reqRow
	for {
		err := retry(ctx, func(ctx context.Context) error {
			r, err := scanRow(h.pool.QueryRow(ctx, `SELECT id, kind, status, result, error, attempts, created_at, finished_at
				FROM dataenv.wait($1, '3 s')`, id))
			if err == nil {
				last = r
			}
			return err
		})
		if err != nil {
			return last, err
		}
		if last.final() {
			return last, nil
		}
	}
}

// read reads a request row (retrying through restarts).
func (h *harness) read(ctx context.Context, id uuid.UUID) (reqRow, error) {
	var r reqRow
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		r, err = scanRow(h.pool.QueryRow(ctx, rowSQL, id))
		return err
	})
	return r, err
}

// call issues a request and waits for it.
func (h *harness) call(ctx context.Context, kind string, args map[string]any) (reqRow, error) {
	id, err := h.issue(ctx, kind, args)
	if err != nil {
		return reqRow{}, err
	}
	return h.await(ctx, id)
}

// queryDB runs a query on a database of the cluster as the superuser, retrying through
// restarts, and scans the single row into dest.
func (h *harness) queryDB(ctx context.Context, db, sql string, args []any, dest ...any) error {
	return retry(ctx, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, h.pg.DSN(db))
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		return conn.QueryRow(ctx, sql, args...).Scan(dest...)
	})
}
