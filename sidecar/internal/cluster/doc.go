// Package cluster administers the Postgres clusters registered in the control database
// (dataenv.clusters): it performs the setup_cluster, create_database, drop_database,
// create_datatable_role and drop_datatable_role requests, and offers the fork and lake work a
// small API to reach a cluster and create or drop marked databases on it.
//
// # Building blocks
//
//	admin, _ := cluster.New(cluster.Config{Control: pool, ControlDSN: dsn, Logger: log, Metrics: m})
//	admin.Register(registry)                              // the six request kinds (check_cluster too)
//
//	admin.WithLifecycleLock(ctx, "c1", rep, func(ctx context.Context, l *cluster.Locked) error {
//	    l.Cluster()                                       // configuration read under the lock
//	    l.Control()                                       // the control connection holding the lock
//	    conn, err := l.Connect(ctx, "db")                 // admin connection to a database
//	    role, err := l.EnsureWorkspaceRole(ctx, "ws")     // the workspace's managed role
//	    ws, err := l.ConnectWorkspace(ctx, "ws", "db")    // as that role (what jobs use)
//	    wlp, err := l.WorkspaceLibpq(ctx, "ws", "db")     // its libpq env; defer wlp.Close()
//	    role, err = l.GrantDatatable(ctx, "ws", "db")     // what a datatable in db grants the role
//	    lp, err := l.Libpq("db")                          // env for pg_dump/psql; defer lp.Close()
//	    out, err := l.CreateMarkedDatabase(ctx, "dataenv_fork_x", cluster.CreateOptions{
//	        Request: req.ID, Template: "parent_db", ForWorkspace: "ws"})
//	    out, err = l.DropMarkedDatabase(ctx, "dataenv_fork_x", cluster.DropOptions{
//	        Exempt: []cluster.Use{{Kind: "fork", Name: "ws"}}, TerminateSessions: true})
//	    uses, err := l.DatabaseUses(ctx, "db")
//	    return nil
//	})
//	conn, err := admin.Connect(ctx, "c1", "db")           // lock only while reading the config
//	lp, err := admin.Libpq(ctx, "c1", "db")
//
// # The lifecycle lock
//
// One advisory lock per cluster in the control database, key
// (dataenv.lock_class('lifecycle'), hashtext(cluster)), computed by the server on both sides
// (sidecar/lock). The SQL functions that save configuration (register_cluster, update_cluster,
// remove_cluster, and the other areas' functions naming a cluster's databases, through
// dataenv.lock_cluster_lifecycle) take it as a transaction lock; every side effect here takes it
// as a session lock on a pinned control connection and reads the cluster's configuration and
// secret under it, so a database is never created on one cluster while the configuration names
// another. When the lock is busy, a step with status "waiting" is reported before blocking.
// Work on the control database under the lock runs on Locked.Control(), the connection that
// holds it, so a holder never waits for a second pooled connection.
//
// # Connections
//
// The instance cluster (kind instance, registered by install) is reached with the sidecar's
// control DSN; external clusters as their admin_user, with the password read from
// dataenv.cluster_secrets (a table no user can read), set on the parsed pgx config and never
// written into a connection string, a log line, an error, a request row or a metric. TLS follows
// the cluster's sslmode; root_certificate_pem is trusted in addition to the system roots (pgx: a
// cert pool; libpq tools: a 0600 bundle file in a private temporary directory, removed by
// Libpq.Close). sslmode=require with a root certificate verifies the chain (verify-ca), as libpq
// does. Every connection pins its session settings in its startup parameters (package
// pgsession: search_path "pg_catalog, pg_temp", no role, writable, no timeouts, ...), which outrank
// the defaults a database's owner may set for every session in it (ALTER DATABASE ... SET);
// libpq tools get PGOPTIONS for the same. External clusters are administered from the postgres
// database.
//
// # Ownership marker
//
// Everything dataenv creates on a cluster carries a comment starting with names.Marker ("managed by
// dataenv"): "managed by dataenv; managed role" on the two roles setup converges, and
// "managed by dataenv; database; request <id>" / "managed by dataenv; datatable role; request <id>"
// on databases and datatable roles. Nothing without the marker is altered or dropped. The control
// database (dataenv.managed_databases, dataenv.datatable_roles) is the authoritative record: a
// drop needs the record AND the marker naming the recorded request, so a database owner who
// writes a marker on a database dataenv did not create cannot get it dropped.
//
// # setup_cluster
//
// Converges, as the cluster's admin: the application role (LOGIN; owns the databases dataenv
// creates), the replication role (LOGIN, REPLICATION when the admin may grant it: a superuser on
// PostgreSQL 15, an admin with REPLICATION on 16+; otherwise a step "unavailable" says so, which
// only matters for triggers on external datatables), and the admin's membership in the
// application role (CREATE DATABASE ... OWNER needs it; on 16+ with SET and INHERIT, which the
// admin may grant because CREATEROLE gives it ADMIN OPTION on roles it created). A role is created
// with its marker in one transaction; its random password is saved in the control database as
// pending first, sent to the server only as a SCRAM verifier, then promoted, so a crash anywhere
// converges on the next run. An existing role without the marker is refused and left untouched
// (its password still works). Each step is reported (created / updated / unchanged / refused /
// unavailable, with why); on success set_up_for records host:port. A second run reports
// unchanged everywhere and Changed=false.
//
// # create_database: check, act, record
//
// Refused unless set_up_for equals the cluster's current host:port. Under the lifecycle lock:
//  1. A control record of another request: refused (the database exists). A record of this
//     request: done already (unchanged).
//  2. The name exists on the cluster: adopted only if it carries this request's marker and is
//     owned by the application role (a crash after the rename below); otherwise refused.
//  3. CREATE DATABASE under a staging name derived from the request id
//     (dataenv_tmp_<request hex>), COMMENT it with the marker, ALTER DATABASE ... RENAME to the
//     name. A re-run finds its staging database by name, so no crash window leaves an unmarked
//     database dataenv cannot recognize.
//  4. Crash point cluster.create_database.after_create, then the control record.
//
// Two concurrent creates of one name serialize on the lock: the second finds the first's record
// and is refused ("already exists"); there is exactly one database and never a half-done state.
//
// # drop_database
//
// Needs the control record and the marker of the recorded request. Refused while
// dataenv.managed_database_uses lists anything (the error lists every use; DropOptions.Exempt
// removes the uses the calling cleanup is deleting itself). Connected sessions: by default the
// drop is refused and the error lists them (pid, user, application, client), because a drop must
// not pull a database from under a user; with terminate_sessions => true (DropOptions.
// TerminateSessions, what fork cleanup uses) they are ended by DROP DATABASE ... WITH (FORCE),
// which needs the admin to be allowed to signal them. The record is removed after the drop; a
// re-run after a crash in between finds the database gone and removes the record.
//
// # Datatable roles
//
// create_datatable_role: NOLOGIN, the marker and GRANT to the application role in one
// transaction, then the record; names are unique per cluster (the same name may exist on two
// clusters). drop_datatable_role: record and marker needed; a role that still owns objects or
// holds privileges is refused with PostgreSQL's detail.
//
// # Names
//
// dataenv.check_name (SQL; applied at call time, and again by the handlers before DDL) accepts
// 1-63 bytes of [a-z0-9_] starting with a letter; pg_ and dataenv_ prefixes and a few names (postgres, template0/1; public,
// none, current_user...) are reserved. Quotes, semicolons, whitespace, upper case and non-ASCII are
// refused, not quoted or normalized. Names dataenv generates (fork databases, dataenv_ prefix) are
// checked by a separate, internal rule. Every identifier reaches SQL through
// pgx.Identifier{}.Sanitize().
//
// # Who may ask
//
// Cluster requests are an administrator's: the SQL functions are granted to dataenv_admin only,
// the kinds' validators refuse a plain INSERT INTO dataenv.requests by anyone else
// (dataenv.is_dataenv_admin: superusers, members of dataenv_admin or of the schema owner), and
// the registry checks every request's requested_by against the kinds' policy (admin) with
// dataenv.authorize_request before each attempt.
//
// # Workspace roles (workspacerole.go, workspaceconn.go, workspacegrant.go, workspacedrop.go)
//
// Each workspace gets a managed role on each cluster it uses: names.WorkspaceRole(installation,
// cluster, workspace), LOGIN and no other attribute, the marker "managed by dataenv; workspace
// role; installation <id>; workspace <id>; incarnation <created_at>", recorded in
// dataenv.workspace_roles with its OID, its password in dataenv.workspace_role_secrets (saved
// pending, set as a SCRAM verifier, promoted). EnsureWorkspaceRole converges it (refusing a role
// without the marker or with another OID, taking back attributes someone added, dropping the role
// of an earlier incarnation of the workspace id first) and makes the admin a member (16+: WITH
// INHERIT TRUE, SET TRUE). GrantDatatable mirrors, in a datatable's database, the DML privileges
// of the application role. DropWorkspaceRole reassigns what the role owns to the admin, drops its
// privileges in every recorded database and drops it. docs/least-privilege.md has the whole
// picture; jobs never connect as an admin.
//
// # Errors
//
// Refusals (guards that held, bad names) are *RefusedError (IsRefused) and are not retried;
// network failures are request.Retryable. Every error leaving WithLifecycleLock is scrubbed of
// the cluster's secrets as a last safety net.
package cluster
