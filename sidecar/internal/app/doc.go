// Package app is dataenv's composition root: it turns the configuration the command line parsed
// into a running sidecar. It opens the control pool, builds every shared component once (metrics,
// the cluster administrator, the lake registry and resolver, the runner client, the job and fork
// services), registers every request kind's handler, and hands the result to the daemon (leader
// election, replication, dispatch, heartbeat, HTTP). Nothing else in the tree wires components.
package app
