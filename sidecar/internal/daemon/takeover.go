package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
)

// takeover runs once leadership is won, before anything else: it ends the control-database
// sessions of sidecar instances that no longer lead (a killed leader's backends finish their
// statement after their client is gone: a lifecycle lock wait that is granted, an outcome
// write, the walsender that holds the slot) and waits until they are gone, then marks those
// instances as not leading. Healthy standbys are spared. A failure is logged, not fatal: the
// fences of each request and the compare-and-set on attempts still hold.
func (s *Sidecar) takeover(ctx context.Context, stepDown time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	started := time.Now()
	s.waitForStepDown(ctx, stepDown)
	n, err := s.fenceControl(ctx)
	if err != nil {
		s.cfg.Logger.Warn("ending the sessions of earlier leaders failed; continuing", "error", err)
		return
	}
	if n > 0 {
		s.cfg.Logger.Info("ended the control-database sessions of earlier leaders", "sessions", n,
			"took", time.Since(started).Round(time.Millisecond))
	}
}

func (s *Sidecar) fenceControl(ctx context.Context) (int, error) {
	others, err := fence.OtherInstances(ctx, s.pool, s.id)
	if err != nil || len(others) == 0 {
		return 0, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("get a control connection: %w", err)
	}
	defer conn.Release()
	var db string
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_database()`).Scan(&db); err != nil {
		return 0, err
	}
	n, err := fence.Terminate(ctx, conn.Conn(), db, fence.Victims{Instances: others}, func(left int) {
		s.cfg.Logger.Info("waiting for sessions of earlier leaders to end", "sessions", left)
	})
	if err != nil {
		return n, err
	}
	_, err = s.pool.Exec(ctx, `UPDATE dataenv.sidecars SET is_leader = false, ready = false
		WHERE instance_id <> $1 AND is_leader`, s.id)
	return n, err
}

// liveLeaderSQL: another instance that says it leads and still has sessions on the control
// database may be alive, working until it notices that its lock is gone.
const liveLeaderSQL = `
SELECT EXISTS (
  SELECT FROM dataenv.sidecars s
   WHERE s.instance_id <> $1 AND s.is_leader AND s.heartbeat_at > now() - interval '10 s'
     AND EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
                  WHERE a.application_name LIKE 'dataenv/' || substr(replace(s.instance_id::text, '-', ''), 1, 12) || '/%'))`

// waitForStepDown waits, at most bound, while an earlier leader may still be alive and working:
// fencing it before it noticed its loss would leave it free to open sessions after the fence
// (and make again what a drop removed). A killed leader whose sessions are gone costs no wait.
func (s *Sidecar) waitForStepDown(ctx context.Context, bound time.Duration) {
	deadline := time.Now().Add(bound)
	logged := false
	for time.Now().Before(deadline) {
		var alive bool
		if err := s.pool.QueryRow(ctx, liveLeaderSQL, s.id).Scan(&alive); err != nil || !alive {
			return
		}
		if !logged {
			s.cfg.Logger.Info("an earlier leader may still be working; waiting for it to step down", "at_most", bound)
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
