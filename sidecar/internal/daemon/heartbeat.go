package daemon

import (
	"context"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/dataenv/dataenv/sidecar/internal/version"
)

const heartbeatSQL = `
INSERT INTO dataenv.sidecars (instance_id, hostname, pid, version, is_leader, confirmed_lsn, ready, heartbeat_at,
                              satellite_connections_open, satellite_connections_in_use)
VALUES ($1, $2, $3, $4, $5, $6, $7, now(), $8, $9)
ON CONFLICT (instance_id) DO UPDATE
   SET is_leader = EXCLUDED.is_leader, confirmed_lsn = EXCLUDED.confirmed_lsn,
       ready = EXCLUDED.ready, heartbeat_at = now(),
       satellite_connections_open = EXCLUDED.satellite_connections_open,
       satellite_connections_in_use = EXCLUDED.satellite_connections_in_use`

const backlogSQL = `
SELECT kind, count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'running')
  FROM dataenv.requests WHERE status IN ('pending', 'running') GROUP BY kind`

const slotSQL = `
SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint
  FROM pg_catalog.pg_replication_slots WHERE slot_name = dataenv.slot_name()`

// heartbeat records this process in dataenv.sidecars and refreshes the gauges that come from
// queries, every two seconds until ctx ends.
func (s *Sidecar) heartbeat(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		s.beat(ctx)
		select {
		case <-ctx.Done():
			s.beat(context.WithoutCancel(ctx))
			return
		case <-t.C:
		}
	}
}

func (s *Sidecar) beat(ctx context.Context) {
	var lsn *string
	if v := s.lsn.Load(); v != 0 {
		l := pglogrepl.LSN(v).String()
		lsn = &l
	}
	leading := s.leading.Load() && ctx.Err() == nil
	var satOpen, satInUse int
	if s.cfg.SatelliteStats != nil {
		satOpen, satInUse = s.cfg.SatelliteStats()
	}
	s.cfg.Metrics.SetSatelliteConnections(satOpen, satInUse)
	_, err := s.pool.Exec(ctx, heartbeatSQL, s.id, hostname(), pid(), version.Version, leading, lsn, s.ready.Load() && leading,
		satOpen, satInUse)
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("heartbeat failed", "error", err)
		return
	}
	if leading {
		s.refreshGauges(ctx)
	}
}

func (s *Sidecar) refreshGauges(ctx context.Context) {
	rows, err := s.pool.Query(ctx, backlogSQL)
	if err == nil {
		pending, running := map[string]int{}, map[string]int{}
		for rows.Next() {
			var kind string
			var p, r int
			if rows.Scan(&kind, &p, &r) == nil {
				pending[kind], running[kind] = p, r
			}
		}
		rows.Close()
		s.cfg.Metrics.SetRequestBacklog(pending, running)
	}
	var retained, lag int64
	if err := s.pool.QueryRow(ctx, slotSQL).Scan(&retained, &lag); err == nil {
		s.cfg.Metrics.SetRetainedWAL(uint64(max(retained, 0)))
		s.cfg.Metrics.SetReplicationLag(uint64(max(lag, 0)), time.Duration(s.lag.Load()))
	}
}
