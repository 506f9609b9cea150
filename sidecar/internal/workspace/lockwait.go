package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// lockWaitsSQL lists the locks that the request's other sessions on this database (pg_dump, the
// total's session) wait for, with the sessions that hold them. The watch's own session has the
// request's application_name too (sidecar/internal/fence), which is how it knows them. What the
// admin may not read of another role's session (its state without pg_read_all_stats) is empty.
const lockWaitsSQL = `
SELECT CASE WHEN l.locktype = 'relation' THEN 'table ' || l.relation::pg_catalog.regclass::text ELSE l.locktype END,
       l.mode, h.pid, coalesce(b.usename::text, ''), coalesce(b.state, ''),
       coalesce(pg_catalog.date_part('epoch', pg_catalog.now() - b.xact_start)::bigint, -1)
  FROM pg_catalog.pg_stat_activity w
  JOIN pg_catalog.pg_locks l ON l.pid = w.pid AND NOT l.granted
 CROSS JOIN LATERAL pg_catalog.unnest(pg_catalog.pg_blocking_pids(w.pid)) AS h(pid)
  LEFT JOIN pg_catalog.pg_stat_activity b ON b.pid = h.pid
 WHERE w.datname = pg_catalog.current_database() AND w.pid <> pg_catalog.pg_backend_pid()
   AND w.application_name = pg_catalog.current_setting('application_name')
 ORDER BY 1, 3`

// lockWaitTimeout bounds a look at the parent's locks (its connection takes the cluster's
// lifecycle lock a moment): the load's end waits for a look under way.
const lockWaitTimeout = 3 * time.Second

// lockWatch tells what a dump of the parent waits for when its load stops moving. pg_dump locks
// every table it dumps first (ACCESS SHARE), so a session that holds one in ACCESS EXCLUSIVE
// mode (a migration's ALTER TABLE in a transaction left open) holds the copy up for as long as
// it lasts; the request should say so, and whose session it is, rather than the same progress.
type lockWatch struct {
	connect   func(context.Context) (*pgx.Conn, error)
	conn      *pgx.Conn
	lastBytes int64
	log       *slog.Logger
	warned    bool // a failed look is logged once a load
}

// watchLocks watches the locks of database on cluster.
func (s *Service) watchLocks(cluster, database string) *lockWatch {
	return &lockWatch{log: s.log.With("cluster", cluster, "database", database), connect: func(ctx context.Context) (*pgx.Conn, error) {
		return s.cfg.Clusters.Connect(ctx, cluster, database)
	}}
}

// waits says what the load waits for: "" when it moved since the last call (bytes is what it has
// streamed so far), waits for no lock, or the look failed (the watch only informs: a failed look
// is logged once and tried again at the next call).
func (w *lockWatch) waits(ctx context.Context, bytes int64) string {
	moved := bytes != w.lastBytes
	w.lastBytes = bytes
	if moved {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, lockWaitTimeout)
	defer cancel()
	held, err := w.look(ctx)
	if err != nil {
		w.close(ctx)
		if !w.warned {
			w.warned = true
			w.log.Warn("could not see what a stalled dump of the parent waits for", "error", err)
		}
		return ""
	}
	return describeLockWaits(held)
}

// look lists the locks the request's sessions wait for, on the watch's session (opened on first use).
func (w *lockWatch) look(ctx context.Context) ([]lockHeld, error) {
	if w.conn == nil {
		conn, err := w.connect(ctx)
		if err != nil {
			return nil, err
		}
		w.conn = conn
	}
	rows, err := w.conn.Query(ctx, lockWaitsSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[lockHeld])
}

// close ends the watch's session, if it has one (w may be nil).
func (w *lockWatch) close(ctx context.Context) {
	if w != nil && w.conn != nil {
		_ = w.conn.Close(context.WithoutCancel(ctx))
		w.conn = nil
	}
}

// lockHeld is one lock a session of the request waits for and one session that holds it.
type lockHeld struct {
	Object, Mode      string
	PID               int32
	Role, State       string
	TransactionAgeSec int64 // -1: unknown
}

// describeLockWaits: "waits for table public.t (AccessShareLock), held by session 2150 (role
// app, idle in transaction, in a transaction for 45s); ..." (empty: nothing).
func describeLockWaits(held []lockHeld) string {
	var parts []string
	for _, h := range held {
		var who []string
		if h.Role != "" {
			who = append(who, "role "+h.Role)
		}
		if h.State != "" {
			who = append(who, h.State)
		}
		if h.TransactionAgeSec >= 0 {
			who = append(who, fmt.Sprintf("in a transaction for %s", time.Duration(h.TransactionAgeSec)*time.Second))
		}
		s := fmt.Sprintf("%s (%s), held by session %d", h.Object, h.Mode, h.PID)
		if len(who) > 0 {
			s += " (" + strings.Join(who, ", ") + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return ""
	}
	return "the dump of the parent waits for " + strings.Join(parts, "; ") +
		"; it goes on once the lock is released (SELECT dataenv.cancel(id) gives up)"
}
