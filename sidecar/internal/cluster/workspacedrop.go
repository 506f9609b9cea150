package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// DropWorkspaceRole drops workspace's role on the cluster, if dataenv recorded one: check the
// name's OID against the record and its marker against the recorded incarnation (a mismatch is
// refused and left untouched), refuse while the role still owns a database (a fork copy not
// dropped yet), then in every database it was granted something in and in the maintenance
// database: REASSIGN OWNED BY it TO the admin (what it created in a lake catalog stays, owned by
// the admin) and DROP OWNED BY it (its privileges); then DROP ROLE and the record. Each step is
// idempotent: a crash anywhere converges on the next call. Without a record, nothing is done.
func (l *Locked) DropWorkspaceRole(ctx context.Context, workspace string) error {
	rec, err := l.workspaceRoleRecord(ctx, workspace)
	if err != nil || !rec.exists {
		return err
	}
	defer l.admin.roleCache.forget(l.cluster.Name, workspace)
	inst, err := l.admin.installation(ctx, l.Control())
	if err != nil {
		return err
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	id, err := readRoleIdentity(ctx, conn, rec.role)
	if err != nil {
		return err
	}
	if id.exists {
		if err := l.checkDroppableWorkspaceRole(ctx, conn, rec, id, workspaceRoleMarker(inst, workspace, rec.incarnation)); err != nil {
			return err
		}
		if err := l.revokeWorkspaceRole(ctx, conn, workspace, rec.role, id.oid); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(rec.role)); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "2BP01" {
				return request.Refusef("role %q on cluster %q still has objects or privileges dataenv did not give it: %s %s",
					rec.role, l.cluster.Name, pgErr.Message, pgErr.Detail)
			}
			return fmt.Errorf("drop role %q on cluster %q: %w", rec.role, l.cluster.Name, err)
		}
		crashpoint.HitOnce(CrashAfterDropWorkspaceRole)
		request.Reportf(ctx, l.rep, "workspace role "+rec.role, StatusDropped, "on cluster %s", l.cluster.Name)
	}
	if _, err := l.Control().Exec(ctx, `DELETE FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = $2`,
		l.cluster.Name, workspace); err != nil {
		return retryable(fmt.Errorf("remove the record of role %q: %w", rec.role, err))
	}
	return nil
}

// checkDroppableWorkspaceRole: the recorded OID, the marker of the recorded incarnation, and no
// database owned.
func (l *Locked) checkDroppableWorkspaceRole(ctx context.Context, conn *pgx.Conn, rec workspaceRoleRecord, id roleIdentity, marker string) error {
	if rec.oid != 0 && id.oid != rec.oid {
		return request.Refusef("role %q on cluster %q has OID %d, but dataenv recorded OID %d: it is not the role dataenv created; left untouched",
			rec.role, l.cluster.Name, id.oid, rec.oid)
	}
	if id.comment != marker {
		return request.Refusef("role %q on cluster %q does not carry dataenv's marker for this workspace (comment %q); left untouched",
			rec.role, l.cluster.Name, truncate(id.comment, 200))
	}
	rows, err := conn.Query(ctx, `SELECT datname::text FROM pg_catalog.pg_database WHERE datdba = $1::bigint::oid ORDER BY 1`, int64(id.oid))
	if err != nil {
		return retryable(fmt.Errorf("list the databases of role %q: %w", rec.role, err))
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return retryable(fmt.Errorf("list the databases of role %q: %w", rec.role, err))
	}
	if len(dbs) > 0 {
		return request.Refusef("role %q on cluster %q still owns database(s) %s; drop them first", rec.role, l.cluster.Name, strings.Join(dbs, ", "))
	}
	return nil
}

// revokeWorkspaceRole gives what role owns to the admin and revokes its privileges, in every
// recorded database that still exists, in every copy dataenv made for another workspace where
// the role holds something (strayCopies), and in the maintenance database (shared objects).
func (l *Locked) revokeWorkspaceRole(ctx context.Context, conn *pgx.Conn, workspace, role string, oid uint32) error {
	rows, err := l.Control().Query(ctx, `SELECT database FROM dataenv.workspace_role_databases WHERE cluster = $1 AND workspace = $2 ORDER BY 1`,
		l.cluster.Name, workspace)
	if err != nil {
		return retryable(fmt.Errorf("list the databases of role %q: %w", role, err))
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return retryable(fmt.Errorf("list the databases of role %q: %w", role, err))
	}
	stray, err := l.strayCopies(ctx, conn, workspace, oid)
	if err != nil {
		return err
	}
	for _, db := range stray {
		if !slices.Contains(dbs, db) {
			request.Reportf(ctx, l.rep, "workspace role "+role, "revoking", "it holds privileges in %s, a copy made for another workspace", db)
			dbs = append(dbs, db)
		}
	}
	revoke := "REASSIGN OWNED BY " + ident(role) + " TO CURRENT_USER; DROP OWNED BY " + ident(role)
	for _, db := range dbs {
		exists, err := databaseExists(ctx, conn, db)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		dc, err := l.Connect(ctx, db)
		if err != nil {
			return err
		}
		_, err = dc.Exec(ctx, revoke)
		dc.Close(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("revoke what role %q holds in database %q: %w", role, db, err)
		}
	}
	if _, err := conn.Exec(ctx, revoke); err != nil {
		return fmt.Errorf("revoke what role %q holds on cluster %q: %w", role, l.cluster.Name, err)
	}
	return nil
}

// shdependDatabasesSQL: the databases in which role $1 owns something or holds a privilege.
const shdependDatabasesSQL = `
SELECT DISTINCT d.datname::text FROM pg_catalog.pg_shdepend s JOIN pg_catalog.pg_database d ON d.oid = s.dbid
 WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND s.refobjid = $1::bigint::oid ORDER BY 1`

// strayCopies are the databases dataenv made for another workspace (fork copies, schema
// templates: dataenv.managed_databases) in which the role of workspace holds something. A copy
// never carries grants to another workspace's role (the workspaces area maps or leaves them
// out), so these are privileges that reached it anyway; they are dataenv's to take back when the
// role goes, where privileges in a database dataenv did not make are not (the drop is refused).
func (l *Locked) strayCopies(ctx context.Context, conn *pgx.Conn, workspace string, oid uint32) ([]string, error) {
	if oid == 0 {
		return nil, nil
	}
	rows, err := conn.Query(ctx, shdependDatabasesSQL, int64(oid))
	if err != nil {
		return nil, retryable(fmt.Errorf("list the databases where role %d holds something: %w", oid, err))
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(held) == 0 {
		return nil, retryable(err)
	}
	rows, err = l.Control().Query(ctx, `SELECT name FROM dataenv.managed_databases
		WHERE cluster = $1 AND name = ANY($2) AND for_workspace IS NOT NULL AND for_workspace <> $3 ORDER BY 1`,
		l.cluster.Name, held, workspace)
	if err != nil {
		return nil, retryable(fmt.Errorf("look up the copies among %v: %w", held, err))
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, retryable(err)
	}
	return dbs, nil
}

func databaseExists(ctx context.Context, conn *pgx.Conn, db string) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_database WHERE datname = $1)`, db).Scan(&ok); err != nil {
		return false, retryable(fmt.Errorf("look up database %q: %w", db, err))
	}
	return ok, nil
}

// DropWorkspaceRoles drops workspace's role on every cluster dataenv recorded one for, each under
// that cluster's lifecycle lock, unless the workspace still exists as the incarnation the role
// was made for (a live workspace keeps its roles) or is a fork that create_fork is still making
// (its copies, owned by the role, exist before its workspace row: the incarnation is the
// request's created_at, see EnsureWorkspaceRoleAt). It is what cleans up after a dropped
// workspace; failures are joined (the roles that could not be dropped stay recorded, and a later
// call retries them).
func (a *Admin) DropWorkspaceRoles(ctx context.Context, workspace string, rep request.Reporter) error {
	rows, err := a.cfg.Control.Query(ctx, `SELECT r.cluster FROM dataenv.workspace_roles r
		 WHERE r.workspace = $1 AND NOT `+roleWanted("r.workspace", "r.incarnation")+`
		 ORDER BY 1`, workspace)
	if err != nil {
		return retryable(fmt.Errorf("list the roles of workspace %q: %w", workspace, err))
	}
	clusters, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return retryable(fmt.Errorf("list the roles of workspace %q: %w", workspace, err))
	}
	var errs []error
	for _, c := range clusters {
		err := a.WithLifecycleLock(ctx, c, rep, func(ctx context.Context, l *Locked) error {
			if err := crashpoint.FailOnce(CrashFailWorkspaceRoleDrop); err != nil {
				return retryable(err) // tests: a transient fault in the drop
			}
			return l.DropWorkspaceRole(ctx, workspace)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

// CleanupFork drops the roles of a dropped fork (DropWorkspaceRoles): the workspaces area's
// ForkCleaner, run by drop_fork and by create_fork before an id is used again.
func (a *Admin) CleanupFork(ctx context.Context, workspace string, rep request.Reporter) error {
	return a.DropWorkspaceRoles(ctx, workspace, rep)
}
