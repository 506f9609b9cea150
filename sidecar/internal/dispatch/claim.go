package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// claimKind is what a claim decided.
type claimKind int

const (
	claimed       claimKind = iota // running committed with a new attempt: run the handler
	claimLater                     // no row matched but the request is still ours: try again
	claimLetGo                     // the row provably moved on: forget the entry
	claimCancel                    // running, cancelled while no handler ran: write the cancellation
	claimStopping                  // the dispatcher is going away
)

// claimResult is a claim's decision.
type claimResult struct {
	kind    claimKind
	attempt int // claimed: the new attempt; claimCancel: the row's attempt
	reason  string
	delay   time.Duration
	row     rowState
}

// rowState is where a request stands in a new snapshot.
type rowState struct {
	visible   bool
	gone      bool // not visible although its transaction is known to be over: deleted
	status    request.Status
	attempts  int
	cancelled bool
}

// claim moves the request to running with a new attempt number (compare-and-set on the attempt
// the entry holds). A claim that matches no row is judged by the row as a new snapshot shows it:
// only a row that provably moved on (finished, a newer attempt, deleted) is let go; a row not
// visible yet, or still pending/running at our attempt, is claimed again later.
func (d *Dispatcher) claim(ctx context.Context, e *entry) claimResult {
	var attempt int
	err := d.cfg.Pool.QueryRow(ctx, claimSQL, e.req.ID, e.req.Attempts).Scan(&attempt)
	switch {
	case err == nil:
		return claimResult{kind: claimed, attempt: attempt}
	case ctx.Err() != nil:
		return claimResult{kind: claimStopping}
	case !errors.Is(err, pgx.ErrNoRows):
		return d.claimAgain(e, "error: "+err.Error(), errorDelay(e.claimTries))
	}
	st, err := readRow(ctx, d.cfg.Pool, e)
	if err != nil {
		if ctx.Err() != nil {
			return claimResult{kind: claimStopping}
		}
		return d.claimAgain(e, "error: "+err.Error(), errorDelay(e.claimTries))
	}
	return d.judgeClaim(e, st)
}

// judgeClaim decides what a claim that matched no row means.
func (d *Dispatcher) judgeClaim(e *entry, st rowState) claimResult {
	held := e.req.Attempts
	switch {
	case st.gone:
		return claimResult{kind: claimLetGo, reason: "deleted", row: st}
	case !st.visible:
		return d.claimAgain(e, "not visible yet", visibilityDelay(e.claimTries))
	case st.status.Finished():
		return claimResult{kind: claimLetGo, reason: "finished", row: st}
	case st.attempts != held:
		// A newer attempt is someone else's (if its holder died, the rescuer finds the request
		// running with an attempt no live worker holds); an older one cannot be ours to take.
		return claimResult{kind: claimLetGo, reason: fmt.Sprintf("attempt %d, not %d", st.attempts, held), row: st}
	case st.cancelled && st.status == request.Running:
		return claimResult{kind: claimCancel, attempt: st.attempts, row: st}
	default:
		// pending or running at our attempt: the claim's snapshot was older than this read's.
		return d.claimAgain(e, "raced a commit", visibilityDelay(0))
	}
}

func (d *Dispatcher) claimAgain(e *entry, reason string, delay time.Duration) claimResult {
	return claimResult{kind: claimLater, reason: reason, delay: delay}
}

// visibilityDelay: a decoded commit usually becomes visible well within a millisecond, but a
// commit waiting for a synchronous standby stays invisible until the standby answers.
func visibilityDelay(tries int) time.Duration {
	return min(time.Millisecond<<min(tries, 10), time.Second)
}

// errorDelay: the control database is unreachable or restarting.
func errorDelay(tries int) time.Duration {
	return min(100*time.Millisecond<<min(tries, 6), 5*time.Second)
}

// readRow reads the request's row. A row not visible is told apart from a deleted one by its
// inserting transaction: still in progress (a commit that is decoded but not visible yet) or over
// before a second read that still misses it. An entry read from the table (no decoded xact) that
// is missing now was deleted.
func readRow(ctx context.Context, pool *pgxpool.Pool, e *entry) (rowState, error) {
	st, err := readState(ctx, pool, e)
	if err != nil || st.visible {
		return st, err
	}
	if e.xact == "" {
		st.gone = true
		return st, nil
	}
	var xs *string
	if err := pool.QueryRow(ctx, xactStatusSQL, e.xact).Scan(&xs); err != nil {
		return st, fmt.Errorf("read the status of transaction %s of request %s: %w", e.xact, e.req.ID, err)
	}
	if xs != nil && *xs == "in progress" {
		return st, nil
	}
	if st, err = readState(ctx, pool, e); err == nil && !st.visible {
		st.gone = true
	}
	return st, err
}

func readState(ctx context.Context, pool *pgxpool.Pool, e *entry) (rowState, error) {
	var st rowState
	var status string
	err := pool.QueryRow(ctx, rowStateSQL, e.req.ID).Scan(&status, &st.attempts, &st.cancelled)
	if errors.Is(err, pgx.ErrNoRows) {
		return rowState{}, nil
	}
	if err != nil {
		return st, fmt.Errorf("read request %s: %w", e.req.ID, err)
	}
	st.visible, st.status = true, request.Status(status)
	return st, nil
}

// readUnfinished lists the pending and running requests.
func readUnfinished(ctx context.Context, pool *pgxpool.Pool) ([]request.Request, error) {
	rows, err := pool.Query(ctx, unfinishedSQL)
	if err != nil {
		return nil, fmt.Errorf("read unfinished requests: %w", err)
	}
	return pgx.CollectRows(rows, ScanRequest)
}

// ScanRequest scans a row of the columns RequestColumns lists.
func ScanRequest(row pgx.CollectableRow) (request.Request, error) {
	var r request.Request
	var args []byte
	var status string
	err := row.Scan(&r.ID, &r.Kind, &args, &status, &r.Attempts, &r.RequestedBy, &r.CancelRequested, &r.CreatedAt)
	r.Args, r.Status = args, request.Status(status)
	return r, err
}
