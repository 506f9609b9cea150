package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs a query returning one row (a pool, a connection, a transaction).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Victims says which of the sidecar's sessions are no longer anyone's.
type Victims struct {
	// Instances are the instance tags of sidecars that no longer lead: every session of theirs.
	Instances map[string]bool
	// Request and Below: the sessions of attempts of Request numbered below Below.
	Request uuid.UUID
	Below   int
}

// Match reports whether the session tagged t is a victim.
func (v Victims) Match(t Tag) bool {
	if v.Instances[t.Instance] {
		return true
	}
	return v.Request != uuid.Nil && t.Request == v.Request && t.Attempt < v.Below
}

// None reports whether v can match no session at all: no former leader, and no earlier attempt
// (attempts are numbered from 1, so the first has none). Terminate would find nothing to end.
func (v Victims) None() bool {
	return len(v.Instances) == 0 && (v.Request == uuid.Nil || v.Below <= 1)
}

// ErrNotLeader is returned when the sidecar that wants to fence does not hold leadership: it must
// not end anyone's sessions, and its work belongs to the new leader.
var ErrNotLeader = errors.New("this sidecar no longer holds the leader lock; the leader resumes its requests")

// othersSQL lists the instances of this installation that no longer lead (the leader's row says
// so, or they stopped heartbeating) and checks that the session named $2 holds the leader lock.
// Healthy standbys (is_leader false, fresh heartbeat) are spared: they open no side-effect
// session, and their control sessions only heartbeat.
const othersSQL = `
SELECT coalesce(array_agg(substr(replace(instance_id::text, '-', ''), 1, 12))
                FILTER (WHERE instance_id <> $1 AND (is_leader OR heartbeat_at < now() - interval '10 s')
                              AND heartbeat_at > now() - interval '1 day'), '{}'),
       EXISTS (SELECT FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
                  AND l.classid = dataenv.lock_class('leader')::oid
                  AND l.objid = pg_catalog.hashtext(pg_catalog.current_database())::oid
                  AND a.application_name = $2)
  FROM dataenv.sidecars`

// OtherInstances returns the instances that no longer lead, read from the control database; it
// returns ErrNotLeader when instance itself does not hold the leader lock.
func OtherInstances(ctx context.Context, control Querier, instance uuid.UUID) (map[string]bool, error) {
	return scanOthers(control.QueryRow(ctx, othersSQL, instance, SessionName(instance, RoleLeader)))
}

// QueueOtherInstances queues OtherInstances' read on b, for a caller that has other reads to make
// in the same round trip: once b's results are closed, *others and *err hold its answer (the
// batch's own Close fails only for what failed in the server or the connection).
func QueueOtherInstances(b *pgx.Batch, instance uuid.UUID, others *map[string]bool, err *error) {
	b.Queue(othersSQL, instance, SessionName(instance, RoleLeader)).QueryRow(func(row pgx.Row) error {
		*others, *err = scanOthers(row)
		return nil
	})
}

func scanOthers(row pgx.Row) (map[string]bool, error) {
	var tags []string
	var leading bool
	if err := row.Scan(&tags, &leading); err != nil {
		return nil, fmt.Errorf("read the sidecar instances: %w", err)
	}
	if !leading {
		return nil, ErrNotLeader
	}
	out := make(map[string]bool, len(tags))
	for _, t := range tags {
		out[t] = true
	}
	return out, nil
}

const sessionsSQL = `
SELECT pid, application_name FROM pg_catalog.pg_stat_activity
 WHERE application_name LIKE 'dataenv/%' AND pid <> pg_catalog.pg_backend_pid()
   AND ($1 = '' OR datname = $1)`

// Terminate ends every session v matches on the server conn is connected to (in database only,
// when not ""), and returns once none is left. waiting (may be nil) is called once, with the
// number left, when sessions survive the first round: a session the role may not signal
// (SQLSTATE 42501) is waited for until it ends by itself. It returns how many it ended.
func Terminate(ctx context.Context, conn *pgx.Conn, database string, v Victims, waiting func(left int)) (int, error) {
	ended := 0
	pause := 20 * time.Millisecond
	for round := 0; ; round++ {
		pids, err := victims(ctx, conn, database, v)
		if err != nil || len(pids) == 0 {
			return ended, err
		}
		if round == 1 && waiting != nil {
			waiting(len(pids))
		}
		for _, pid := range pids {
			ok, err := terminate(ctx, conn, pid)
			if err != nil {
				return ended, err
			}
			if ok {
				ended++
			}
		}
		select {
		case <-ctx.Done():
			return ended, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*2, 500*time.Millisecond)
	}
}

func victims(ctx context.Context, conn *pgx.Conn, database string, v Victims) ([]int32, error) {
	rows, err := conn.Query(ctx, sessionsSQL, database)
	if err != nil {
		return nil, fmt.Errorf("list the sessions of earlier attempts: %w", err)
	}
	defer rows.Close()
	var pids []int32
	for rows.Next() {
		var pid int32
		var name string
		if err := rows.Scan(&pid, &name); err != nil {
			return nil, err
		}
		if t, ok := Parse(name); ok && v.Match(t) {
			pids = append(pids, pid)
		}
	}
	return pids, rows.Err()
}

// terminate ends one backend, waiting up to a second for it to exit; a backend the role may not
// signal is left to end by itself (false, nil).
func terminate(ctx context.Context, conn *pgx.Conn, pid int32) (bool, error) {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_terminate_backend($1, 1000)`, pid).Scan(&ok)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("end the session of pid %d: %w", pid, err)
	}
	return ok, nil
}
