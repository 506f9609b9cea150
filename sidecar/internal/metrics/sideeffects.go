package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Side-effect operations, the values of the operation label.
const (
	OpSetupCluster        = "setup_cluster"
	OpCreateDatabase      = "create_database"
	OpDropDatabase        = "drop_database"
	OpCreateDatatableRole = "create_datatable_role"
	OpDropDatatableRole   = "drop_datatable_role"
	OpCreateFork          = "create_fork"
	OpDropFork            = "drop_fork"
	OpDropForkCopy        = "drop_fork_copy"
	OpDropLakeSchema      = "drop_lake_schema"
	OpDeleteForkPrefix    = "delete_fork_prefix"
	OpSchemaTemplate      = "refresh_schema_template"
	OpResetFork           = "reset_fork"
)

// sideEffectOps are every operation, exported at zero from the start.
var sideEffectOps = []string{OpSetupCluster, OpCreateDatabase, OpDropDatabase, OpCreateDatatableRole,
	OpDropDatatableRole, OpCreateFork, OpDropFork, OpDropForkCopy, OpDropLakeSchema, OpDeleteForkPrefix, OpSchemaTemplate,
	OpResetFork}

// lockWaitBuckets: 1 ms to ~4 min (a lifecycle lock can be held by a long template copy).
var lockWaitBuckets = prometheus.ExponentialBuckets(0.001, 4, 10)

func (m *Metrics) addSideEffectMetrics() {
	m.sideEffects = counterVec("side_effects_total",
		"Side effects performed on clusters, lakes and object stores, by operation and result "+
			"(done, unchanged, refused, failed).", "operation", "result")
	m.lockWait = histogram("lifecycle_lock_wait_seconds",
		"Time spent waiting for a cluster's lifecycle advisory lock.", lockWaitBuckets)
	m.objectDeletes = counterVec("objectstore_deleted_objects_total",
		"Objects the guarded prefix delete removed (result done) or failed to remove (result failed).",
		"result")
}

// SideEffect counts one side effect: op names it (e.g. "create_database", "drop_role",
// "drop_schema"), result is done, unchanged, refused or failed.
func (m *Metrics) SideEffect(op, result string) {
	if m == nil {
		return
	}
	m.sideEffects.WithLabelValues(op, result).Inc()
}

// LockWait observes the time spent waiting for a lifecycle lock.
func (m *Metrics) LockWait(d time.Duration) {
	if m == nil {
		return
	}
	m.lockWait.Observe(d.Seconds())
}

// ObjectsDeleted counts n objects of an object-store delete with result done or failed.
func (m *Metrics) ObjectsDeleted(result string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.objectDeletes.WithLabelValues(result).Add(float64(n))
}

// EffectResult is the result label of a side effect: refused when err is a guard that held,
// failed for any other error, done when it changed something, unchanged otherwise.
func EffectResult(changed bool, err error, refused bool) string {
	switch {
	case err != nil && refused:
		return ResultRefused
	case err != nil:
		return ResultFailed
	case changed:
		return ResultDone
	}
	return ResultUnchanged
}
