package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// A catalog reader (querier) is written as plain Query/QueryRow calls. pipelined runs a list of
// them in one round trip instead of one per query: on a loaded machine every round trip waits
// for the server process to be scheduled, and a fork's plan is a dozen queries. The readers run
// twice: first against a recorder, which notes each query and answers it with no rows, then the
// recorded queries go to the server as one batch, and the readers run again against its results
// in order. The second run must ask exactly what the first asked (a reader whose queries depend
// on what an earlier one returned cannot be pipelined): each query is checked against the
// recorded one, and a difference is an error, never a result handed to the wrong reader.
func pipelined(ctx context.Context, tx pgx.Tx, steps []func(context.Context, querier) error) error {
	rec := &recorder{}
	for _, step := range steps {
		if err := step(ctx, rec); err != nil {
			return fmt.Errorf("record the catalog queries: %w", err)
		}
	}
	if len(rec.queued) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, q := range rec.queued {
		b.Queue(q.sql, q.args...)
	}
	br := tx.SendBatch(ctx, b)
	rp := &replay{br: br, queued: rec.queued}
	var err error
	for _, step := range steps {
		if err = step(ctx, rp); err != nil {
			break
		}
	}
	if err == nil && rp.next != len(rec.queued) {
		err = fmt.Errorf("the catalog readers asked %d queries, %d were sent", rp.next, len(rec.queued))
	}
	return errors.Join(err, br.Close())
}

type queuedQuery struct {
	sql  string
	args []any
}

// recorder notes the queries of the first run and answers each with no rows.
type recorder struct{ queued []queuedQuery }

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.queued = append(r.queued, queuedQuery{sql, args})
	return noRows{}, nil
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.queued = append(r.queued, queuedQuery{sql, args})
	return noRow{}
}

// replay hands the batch's results to the second run, in order, checking each query.
type replay struct {
	br     pgx.BatchResults
	queued []queuedQuery
	next   int
}

func (r *replay) check(sql string) error {
	if r.next >= len(r.queued) || r.queued[r.next].sql != sql {
		return fmt.Errorf("catalog query %d is not the one recorded: the readers must ask the same queries in the same order", r.next+1)
	}
	r.next++
	return nil
}

func (r *replay) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	if err := r.check(sql); err != nil {
		return nil, err
	}
	return r.br.Query()
}

func (r *replay) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	if err := r.check(sql); err != nil {
		return errRow{err}
	}
	return r.br.QueryRow()
}

// noRows is an empty result; noRow a row whose Scan leaves its targets as they are.
type noRows struct{}

func (noRows) Close()                                       {}
func (noRows) Err() error                                   { return nil }
func (noRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (noRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (noRows) Next() bool                                   { return false }
func (noRows) Scan(...any) error                            { return nil }
func (noRows) Values() ([]any, error)                       { return nil, nil }
func (noRows) RawValues() [][]byte                          { return nil }
func (noRows) Conn() *pgx.Conn                              { return nil }
func (noRows) TypeMap() *pgtype.Map                         { return nil }

type noRow struct{}

func (noRow) Scan(...any) error { return nil }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
