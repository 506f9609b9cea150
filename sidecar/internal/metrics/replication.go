package metrics

import (
	"time"
)

func (m *Metrics) addReplicationMetrics() {
	m.lagBytes = gauge("replication_lag_bytes",
		"WAL bytes between the server's current WAL end and the sidecar's confirmed flush LSN.")
	m.lagSeconds = gauge("replication_lag_seconds",
		"Age of the oldest committed change the sidecar has not confirmed yet; 0 when caught up.")
	m.confirmedLSN = gauge("replication_confirmed_lsn",
		"Last LSN the sidecar confirmed to the slot, as a number (float64: exact up to 2^53).")
	m.retainedWAL = gauge("replication_slot_retained_wal_bytes",
		"WAL bytes the server keeps for the sidecar's slot (pg_current_wal_lsn() - restart_lsn).")
	m.slotRecreations = counterVec("replication_slot_recreations_total",
		"Replication slots (re)created because the slot was missing, lost or invalidated, by reason.", "reason")
	m.leader = gauge("leader",
		"1 while this sidecar holds the leader lock and runs requests, 0 while it is a standby.")
	m.reconnects = counterVec("reconnects_total",
		"Reconnections after a lost connection, by component (replication, control, cluster, runner...).",
		"component")
}

// SetReplicationLag sets the replication lag in bytes and in time.
func (m *Metrics) SetReplicationLag(bytes uint64, lag time.Duration) {
	if m == nil {
		return
	}
	m.lagBytes.Set(float64(bytes))
	m.lagSeconds.Set(lag.Seconds())
}

// SetConfirmedLSN sets the confirmed flush LSN (pglogrepl.LSN converts with uint64(lsn)).
func (m *Metrics) SetConfirmedLSN(lsn uint64) {
	if m == nil {
		return
	}
	m.confirmedLSN.Set(float64(lsn))
}

// SetRetainedWAL sets the WAL bytes the slot holds back on the server.
func (m *Metrics) SetRetainedWAL(bytes uint64) {
	if m == nil {
		return
	}
	m.retainedWAL.Set(float64(bytes))
}

// SlotRecreated counts a replication slot created again; reason is e.g. "missing" or "invalidated".
func (m *Metrics) SlotRecreated(reason string) {
	if m == nil {
		return
	}
	m.slotRecreations.WithLabelValues(reason).Inc()
}

// SetLeader records whether this sidecar is the leader.
func (m *Metrics) SetLeader(leader bool) {
	if m == nil {
		return
	}
	v := 0.0
	if leader {
		v = 1
	}
	m.leader.Set(v)
}

// Reconnect counts one reconnection of component (e.g. "replication", "control", "runner").
func (m *Metrics) Reconnect(component string) {
	if m == nil {
		return
	}
	m.reconnects.WithLabelValues(component).Inc()
}
