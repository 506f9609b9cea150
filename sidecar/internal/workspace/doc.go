// Package workspace performs the fork requests (create_fork, drop_fork). The read side of
// workspaces (membership, fork chains, datatable resolution) is sidecar/internal/control. Tables: migrations/020_workspaces.up.sql; SQL API,
// row-level security and views: sqlapi/02*_workspace_*.sql.
//
// # Model
//
// A workspace is a root or a fork. A fork's row says so (is_fork, immutable) and names its parent
// (ON DELETE SET NULL): a fork whose parent was dropped is an orphaned fork, never a root. A
// workspace's datatables bind a name to (cluster, database). A fork gets one entry per datatable
// of its parent at creation:
//
//	keep_original  the database the parent resolved to (recorded), resolved through the parent
//	schema_only    a new marked database dataenv_fork_<ws>_<dt>_<hash8> with the parent's schema
//	full_copy      the same with the rows
//
// control.Resolution walks the chain for keep_original entries: it follows the parent's entry of the same
// name while there is one, and falls back to the recorded database where the chain stops.
//
//	res, err := workspace.ResolveDatatable(ctx, pool, "feature-x", "orders")
//	// res.Cluster, res.Database, res.ResolvedFrom, res.Fallback
//	links, err := workspace.Chain(ctx, pool, "feature-x") // itself, parent, ..., root
//	ok, err := workspace.CanUse(ctx, pool, "feature-x", req.RequestedBy)
//
// # The registry of fork copies
//
// dataenv.fork_copies has one row per database create_fork made (or is making), with the
// workspace it was made for, and no foreign key to the workspace: it is the cleanup ledger. A row
// is written, under the cluster's lifecycle lock, before its database is created, and deleted
// only after the database was dropped. The registry is also the authorization: a datatable entry
// may name a copy only of its own workspace or of an ancestor (a trigger refuses the rest), and
// the fork database's name alone grants nothing.
//
// # create_fork: check, clean, copy, commit
//
// The whole request holds an advisory lock on the fork id (dataenv.workspace_lock_class()).
//  1. The fork id exists: done already if this request created it, else refused. The parent must
//     exist and the requester must be able to use it (checked again here, for requested_by).
//  2. Copies registered for the fork id by another request are a previous incarnation's
//     leftovers: dropped first (guarded), together with other areas' leftovers (ForkCleaner);
//     while any of it fails the request is refused, so a new fork never reattaches stale data.
//  3. Per copied datatable: a ready row of this request is kept; a row of this request still
//     "creating" is an interrupted attempt, dropped and made again. Under the lock: registry
//     row, then the marked database (cluster.Locked.CreateMarkedDatabase): by TEMPLATE for a
//     full_copy whose parent has no other session, else empty. Without the lock: pg_dump
//     --schema-only | psql --single-transaction (schema_only) or pg_dump -Fc | pg_restore
//     --single-transaction (full_copy, parent in use), as the cluster's admin with its TLS
//     settings (cluster.Libpq), objects owned by the application role, progress steps every
//     Config.ProgressEvery. Then the row is marked ready.
//  4. One transaction, under the lifecycle locks of every cluster involved (in name order): the
//     fork's workspace row (is_fork, parent, created_by = requester, who becomes a member), its
//     datatable entries; the lake area's trigger on dataenv.workspaces gives the fork its lake
//     entries in the same transaction.
//
// A failure in 3 or 4 drops every copy this request made (rollback) before the request fails; a
// crash anywhere is converged by the rerun through the rules of 1 and 3. Crash points:
// fork.after_create_database, fork.after_load, fork.before_commit.
//
// # drop_fork
//
// Refused for a root (dataenv.drop_workspace), for a non-member, and for a fork with child forks
// unless cascade is asked (then the descendants go first, deepest first, each checked for
// membership). Per workspace: the row is deleted first (its datatable entries go with it; the
// registry remains as the ledger); crash point fork.after_workspace_drop; then other areas'
// cleanups; then each copy is dropped (fork prefix, control record, the marker of the request
// that registered it, no other use; sessions are terminated) and its registry row deleted after
// the drop. Failures are collected, reported in the error and stay registered: drop_fork on the
// same id again (the workspace may already be gone) retries exactly those.
package workspace
