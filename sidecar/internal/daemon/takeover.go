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
func (s *Sidecar) takeover(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	started := time.Now()
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
