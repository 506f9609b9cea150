package metrics

import "time"

// TouchAll calls every method once with representative values, so that every metric family has
// at least one series. Tests use it to list what the sidecar exports (the dashboard and alert
// tests check every query against that list); the sidecar never calls it.
func (m *Metrics) TouchAll() {
	m.Init("ping")
	m.RequestFinished("ping", OutcomeSucceeded, time.Millisecond, 2*time.Millisecond)
	m.SetRequestBacklog(map[string]int{"ping": 1}, map[string]int{"ping": 1})
	m.SetReplicationLag(1024, time.Second)
	m.SetConfirmedLSN(0x16B3748)
	m.SetRetainedWAL(4096)
	m.SlotRecreated("missing")
	m.SetLeader(true)
	m.Reconnect("replication")
	m.SideEffect("create_database", ResultDone)
	m.LockWait(3 * time.Millisecond)
	m.ObjectsDeleted(ResultDone, 2)
	m.RunnerJobFinished(RunnerSucceeded, 100*time.Millisecond)
	m.RunnerPhase("sql", 40*time.Millisecond)
	m.RunnerSpillStop()
	m.RunnerCrash("SIGKILL")
	m.JobLimitHit("timeout")
	m.RequestRescued("pending")
	m.SetOldestUnfinished(3*time.Second, time.Second)
	m.ForkExpired()
	m.RequestsPruned("control", 3)
}
