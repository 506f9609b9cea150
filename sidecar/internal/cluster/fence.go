package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Fencing earlier attempts (see sidecar/internal/fence): every connection opened for a request
// carries the attempt's application_name, and the first connection an attempt opens to a
// cluster ends, on that cluster, the sessions of the request's earlier attempts and of sidecar
// instances that no longer lead, and waits until they are gone, before the attempt checks state
// and acts. Outside a request (no fence.Attempt in the context) nothing changes.

// nameSession gives a connection opened with ctx the attempt's application_name.
func nameSession(ctx context.Context, cfg *pgx.ConnConfig) {
	if att := fence.FromContext(ctx); att != nil {
		cfg.RuntimeParams["application_name"] = att.AppName()
	}
}

// appName is the application_name of libpq tools run for att ("dataenv" outside a request).
func appName(att *fence.Attempt) string {
	if att == nil {
		return "dataenv"
	}
	return att.AppName()
}

// fenceOn fences cluster c over conn, once per attempt and cluster. control is the connection
// that holds the cluster's lifecycle lock: the instances are read on it, so a lock holder never
// waits for a second pooled connection.
func (a *Admin) fenceOn(ctx context.Context, c *Cluster, conn *pgx.Conn, control fence.Querier) error {
	att := fence.FromContext(ctx)
	if att == nil || att.Fenced(c.Name) {
		return nil
	}
	others, err := fence.OtherInstances(ctx, control, att.Instance)
	if err != nil {
		return retryable(fmt.Errorf("fence cluster %q: %w", c.Name, err))
	}
	started := time.Now()
	v := fence.Victims{Instances: others, Request: att.Request, Below: att.Number}
	if v.None() {
		att.MarkFenced(c.Name)
		return nil
	}
	n, err := fence.Terminate(ctx, conn, "", v, func(left int) {
		att.Report("earlier attempts on cluster "+c.Name, "waiting",
			fmt.Sprintf("waiting for %d session(s) of earlier attempts or earlier leaders to end", left))
	})
	if err != nil {
		return retryable(fmt.Errorf("fence cluster %q: %w", c.Name, err))
	}
	att.MarkFenced(c.Name)
	if n > 0 {
		a.log.Info("ended sessions of earlier attempts", "cluster", c.Name, "request", att.Request,
			"attempt", att.Number, "sessions", n, "took", time.Since(started).Round(time.Millisecond))
		att.Report("earlier attempts on cluster "+c.Name, "done", fmt.Sprintf("ended %d session(s)", n))
	}
	return nil
}

// fenceForLibpq fences before a libpq tool runs: a tool cannot fence itself, so when the
// attempt has not reached the cluster yet, a connection is opened (and closed) for it.
func (a *Admin) fenceForLibpq(ctx context.Context, l *Locked) error {
	att := fence.FromContext(ctx)
	if att == nil || att.Fenced(l.cluster.Name) {
		return nil
	}
	others, err := fence.OtherInstances(ctx, l.Control(), att.Instance)
	return a.fenceForLibpqFrom(ctx, l, att, others, err)
}

// fenceForLibpqFrom is fenceForLibpq with the instances read already (others, or err).
func (a *Admin) fenceForLibpqFrom(ctx context.Context, l *Locked, att *fence.Attempt, others map[string]bool, err error) error {
	if err != nil {
		return retryable(fmt.Errorf("fence cluster %q: %w", l.cluster.Name, err))
	}
	// A first attempt with no former leader to fence has nothing to end on any cluster: no
	// connection is opened just to find that out (the leader check is made all the same).
	if (fence.Victims{Instances: others, Request: att.Request, Below: att.Number}).None() {
		att.MarkFenced(l.cluster.Name)
		return nil
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return err
	}
	return conn.Close(context.WithoutCancel(ctx))
}

// fencedWorkspaceAndRole is fenceForLibpq then workspaceAndRole, their reads made in one round
// trip (the instances first: a sidecar that no longer leads reads nothing more it acts on).
func (l *Locked) fencedWorkspaceAndRole(ctx context.Context, workspace string) (time.Time, workspaceRoleRecord, error) {
	att := fence.FromContext(ctx)
	if att == nil || att.Fenced(l.cluster.Name) {
		return l.workspaceAndRole(ctx, workspace)
	}
	b := &pgx.Batch{}
	var others map[string]bool
	var othersErr, recErr error
	var at time.Time
	var rec workspaceRoleRecord
	fence.QueueOtherInstances(b, att.Instance, &others, &othersErr)
	b.Queue(workspaceAndRoleSQL, l.cluster.Name, workspace).QueryRow(func(row pgx.Row) error {
		at, rec, recErr = scanWorkspaceAndRole(row, workspace)
		return nil
	})
	if err := l.Control().SendBatch(ctx, b).Close(); err != nil {
		return at, rec, retryable(fmt.Errorf("fence cluster %q and read workspace %q and the record of its role: %w", l.cluster.Name, workspace, err))
	}
	if err := l.admin.fenceForLibpqFrom(ctx, l, att, others, othersErr); err != nil {
		return at, rec, err
	}
	return at, rec, recErr
}

// errEarlierAttempt: a name only this request uses is taken, or one of its objects vanished,
// while this attempt acted: an earlier attempt's backend is still finishing. The caller fences
// again and re-checks state; it never fails the request for it.
var errEarlierAttempt = errors.New("an earlier attempt of this request is still finishing")

// earlierAttempt maps the errors an unfinished earlier attempt causes on this request's own
// names (a unique violation or "already exists" on CREATE, "does not exist" on the next step) to
// errEarlierAttempt.
func earlierAttempt(err error, codes ...string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		for _, c := range codes {
			if pgErr.Code == c {
				return fmt.Errorf("%w: %v", errEarlierAttempt, err)
			}
		}
	}
	return err
}

// waitOutEarlierAttempt reports the wait, makes the attempt fence the cluster again on its next
// connection, and sleeps a capped backoff before the caller re-checks.
func (l *Locked) waitOutEarlierAttempt(ctx context.Context, round int, cause error) error {
	delay := min(50*time.Millisecond<<min(round, 6), 2*time.Second)
	if att := fence.FromContext(ctx); att != nil {
		att.Unfence(l.cluster.Name)
	}
	l.admin.log.Info("an earlier attempt is still finishing; waiting and checking again", "cluster", l.cluster.Name,
		"round", round, "error", cause)
	if round == 0 {
		request.Report(ctx, l.rep, "earlier attempt on cluster "+l.cluster.Name, "waiting",
			"an earlier attempt of this request is still finishing; waiting for it, then checking again")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(delay):
		return nil
	}
}
