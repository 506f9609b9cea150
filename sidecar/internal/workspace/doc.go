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
//  3. Per copied datatable (copy.go): a ready row of this request is kept; a row of this request
//     still "creating" is an interrupted attempt, dropped and made again. The parent's plan is
//     read (parent.go: owner roles, privileges, default privileges, settings, the database's
//     ACL, locale, sequence positions, what a non-superuser may not create, the schema
//     fingerprint) while the fork's owner role is made (owner.go, readPlanWithOwner: each on its
//     own connection; a full_copy waits for the plan's session to be gone from the server, so a
//     TEMPLATE copy of the parent never finds it). Under the lock: registry row, then the marked
//     database, owned by the fork's owner (owner.go, forkOwnerOf: the one place that names it)
//     and closed to PUBLIC: a TEMPLATE
//     copy of the datatable's current schema template (schema_only, template.go), of the parent
//     (full_copy, parentPlan.templateOK), else empty with the parent's locale. Without the lock
//     (restore.go): pg_dump -Fc --no-owner --no-acl [--schema-only] as the admin, pg_restore
//     --single-transaction connected as the owner, leaving out by catalog and OID what the owner
//     may not create, progress steps every Config.ProgressEvery (waiting steps instead while
//     the dump waits for a lock of the parent: lockwait.go). Then finish.go maps the owners
//     (ALTER ... OWNER in TEMPLATE copies), sets privileges, default privileges, sequences,
//     settings and the database's ACL like the parent's, reporting what it may not carry; the row
//     is marked ready with the report (fork_copies.report). A schema_only copy made by dump
//     enqueues a refresh_schema_template request (in the commit of step 4) that builds the
//     entry's template.
//  4. One transaction, under the lifecycle locks of every cluster involved (in name order): the
//     fork's workspace row (is_fork, parent, created_by = requester, who becomes a member), its
//     datatable entries; the lake area's trigger on dataenv.workspaces gives the fork its lake
//     entries in the same transaction.
//
// A failure in 3 or 4 drops every copy this request made (rollback) before the request fails; a
// crash anywhere is converged by the rerun through the rules of 1 and 3. Crash points:
// fork.after_create_database, fork.after_load, fork.before_commit.
//
// # Schema templates
//
// refresh_schema_template(workspace, datatable), under the entry's template lock (taken before
// any lifecycle lock; a schema_only copy holds it while it copies the template): the entry gone →
// its templates are dropped; else the template whose fingerprint is the parent's current one is
// kept, or a new one is built (registered building, marked private database, schema-only
// restore as the template owner, privileges set, connections refused, ready) and the others are
// dropped (guarded like fork copies: prefix, record, marker, no other use). Removing a datatable
// entry enqueues the request (trigger in sqlapi/028_schema_templates.sql); drop_fork drops its
// entries' templates before its copies. The kept template also gets a spare (spare.go), a row of
// the same ledger that every one of those drops takes along, owned with its objects by a role of
// its own; a schema_only copy takes it under its template and lifecycle locks (claimed taken,
// then cluster.CreateOptions.Spare renames it, and Adopt its role into the fork's workspace role
// when that role does not exist yet) and its fork enqueues the refresh that makes the next one.
// Crash points:
// fork.template.spare_created, cluster.create_database.after_spare_unrecorded,
// cluster.create_database.after_spare_taken.
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
