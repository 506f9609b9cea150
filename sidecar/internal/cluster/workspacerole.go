package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Crash points of the workspace role convergence.
const (
	CrashAfterCreateWorkspaceRole = "cluster.workspace_role.after_create"
	CrashAfterDropWorkspaceRole   = "cluster.workspace_role.after_drop"
	// CrashFailWorkspaceRoleDrop makes the first role drop of DropWorkspaceRoles fail with a
	// transient error (crashpoint.FailOnce), instead of dying.
	CrashFailWorkspaceRoleDrop = "cluster.workspace_role.fail_drop"
)

// WorkspaceRole is a workspace's managed role on one cluster: what its jobs and its members reach
// the cluster as. Name is names.WorkspaceRole(installation, cluster, workspace); OID is the role's
// OID, recorded in dataenv.workspace_roles when it was created.
type WorkspaceRole struct {
	Cluster   string
	Workspace string
	Name      string
	OID       uint32
}

// workspaceRoleAttrs are the attributes of every workspace role: it logs in and has nothing else.
const workspaceRoleAttrs = " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT"

// workspaceRoleMarker is the comment of workspace's role: the marker, the installation and the
// workspace incarnation it was made for.
func workspaceRoleMarker(installation, workspace string, incarnation time.Time) string {
	return fmt.Sprintf("%s; workspace role; installation %s; workspace %s; incarnation %s", names.Marker, installation,
		workspace, incarnation.UTC().Format(time.RFC3339Nano))
}

type workspaceRoleRecord struct {
	exists      bool
	role        string
	oid         uint32 // 0 until recorded
	incarnation time.Time
}

const workspaceRoleRecordSQL = `
SELECT role, coalesce(role_oid, 0)::bigint, incarnation FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = $2`

// workspaceAndRoleSQL is the workspace's incarnation with workspaceRoleRecordSQL's record (NULLs
// when there is none): what a job's every attach reads, in one round trip.
const workspaceAndRoleSQL = `
SELECT w.created_at, r.role, coalesce(r.role_oid, 0)::bigint, r.incarnation
  FROM dataenv.workspaces w LEFT JOIN dataenv.workspace_roles r ON r.cluster = $1 AND r.workspace = w.id
 WHERE w.id = $2`

func (l *Locked) workspaceRoleRecord(ctx context.Context, workspace string) (workspaceRoleRecord, error) {
	var r workspaceRoleRecord
	var oid int64
	err := l.Control().QueryRow(ctx, workspaceRoleRecordSQL, l.cluster.Name, workspace).Scan(&r.role, &oid, &r.incarnation)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return r, retryable(fmt.Errorf("read the record of the role of workspace %q: %w", workspace, err))
	}
	r.exists, r.oid = true, uint32(oid)
	return r, nil
}

// workspaceAndRole is workspaceIncarnation and workspaceRoleRecord in one query.
func (l *Locked) workspaceAndRole(ctx context.Context, workspace string) (time.Time, workspaceRoleRecord, error) {
	return scanWorkspaceAndRole(l.Control().QueryRow(ctx, workspaceAndRoleSQL, l.cluster.Name, workspace), workspace)
}

// scanWorkspaceAndRole reads workspaceAndRoleSQL's row for workspace.
func scanWorkspaceAndRole(row pgx.Row, workspace string) (time.Time, workspaceRoleRecord, error) {
	var at time.Time
	var r workspaceRoleRecord
	var role *string
	var oid int64
	var inc *time.Time
	err := row.Scan(&at, &role, &oid, &inc)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, r, request.Refusef("no workspace named %q", workspace)
	}
	if err != nil {
		return at, r, retryable(fmt.Errorf("read workspace %q and the record of its role: %w", workspace, err))
	}
	if role != nil && inc != nil {
		r = workspaceRoleRecord{exists: true, role: *role, oid: uint32(oid), incarnation: *inc}
	}
	return at, r, nil
}

// installation is the control database's installation id (cached: it never changes).
func (a *Admin) installation(ctx context.Context, q querier) (string, error) {
	a.instMu.Lock()
	defer a.instMu.Unlock()
	if a.inst != "" {
		return a.inst, nil
	}
	if err := q.QueryRow(ctx, `SELECT id::text FROM dataenv.installation`).Scan(&a.inst); err != nil {
		return "", retryable(fmt.Errorf("read the installation id: %w", err))
	}
	return a.inst, nil
}

// roleIdentity is what a drop or a reuse checks about a role found by name.
type roleIdentity struct {
	exists  bool
	oid     uint32
	comment string
	attrs   roleAttrs
}

type roleAttrs struct {
	login, super, createDB, createRole, replication, bypassRLS bool
}

const roleIdentitySQL = `
SELECT r.oid::bigint, coalesce(pg_catalog.shobj_description(r.oid, 'pg_authid'), ''),
       r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolreplication, r.rolbypassrls
  FROM pg_catalog.pg_roles r WHERE r.rolname = $1`

func readRoleIdentity(ctx context.Context, q querier, name string) (roleIdentity, error) {
	var id roleIdentity
	var oid int64
	a := &id.attrs
	err := q.QueryRow(ctx, roleIdentitySQL, name).Scan(&oid, &id.comment, &a.login, &a.super, &a.createDB, &a.createRole, &a.replication, &a.bypassRLS)
	if errors.Is(err, pgx.ErrNoRows) {
		return roleIdentity{}, nil
	}
	if err != nil {
		return id, retryable(fmt.Errorf("read role %q: %w", name, err))
	}
	id.exists, id.oid = true, uint32(oid)
	return id, nil
}

// EnsureWorkspaceRole creates workspace's role on the cluster, or converges the one dataenv
// created for this incarnation of the workspace: check, act, record.
//
//  1. The record of an earlier incarnation of the workspace id: that role is dropped first
//     (DropWorkspaceRole), so a workspace created again never inherits the old one's grants.
//  2. A role of that name without this workspace's marker, or with another OID than recorded:
//     refused and left untouched.
//  3. Missing: the record is written first (no OID yet), the password saved as pending, then
//     CREATE ROLE (LOGIN and nothing else, the SCRAM verifier as password) and its marker in one
//     transaction, then the OID recorded and the password promoted. A crash anywhere converges on
//     the next call.
//  4. The admin becomes a member of the role (PostgreSQL 16+: WITH INHERIT TRUE, SET TRUE), which
//     granting on the role's objects, default privileges and ownership changes to it need. A
//     superuser admin needs nothing.
//
// The workspace must exist. Refusals are *request refusals (not retried).
func (l *Locked) EnsureWorkspaceRole(ctx context.Context, workspace string) (*WorkspaceRole, error) {
	role, _, err := l.ensureWorkspaceRole(ctx, workspace)
	return role, err
}

// EnsureWorkspaceRoleAt is EnsureWorkspaceRole for a workspace that does not exist yet: a fork
// whose copies are made (and owned by its role) before its workspace row is committed with
// created_at = incarnation. A role recorded for another incarnation is dropped first, as by
// EnsureWorkspaceRole; the role of a fork still being created is not a leftover for
// DropWorkspaceRoles (see there).
func (l *Locked) EnsureWorkspaceRoleAt(ctx context.Context, workspace string, incarnation time.Time) (*WorkspaceRole, error) {
	role, _, err := l.ensureWorkspaceRoleAt(ctx, workspace, incarnation)
	return role, err
}

// ensureWorkspaceRole is EnsureWorkspaceRole returning the settled password too.
func (l *Locked) ensureWorkspaceRole(ctx context.Context, workspace string) (*WorkspaceRole, string, error) {
	incarnation, rec, err := l.workspaceAndRole(ctx, workspace)
	if err != nil {
		return nil, "", err
	}
	return l.ensureWorkspaceRoleFrom(ctx, workspace, incarnation, rec)
}

// ensureWorkspaceRoleAt converges the role of workspace's incarnation.
func (l *Locked) ensureWorkspaceRoleAt(ctx context.Context, workspace string, incarnation time.Time) (*WorkspaceRole, string, error) {
	rec, err := l.workspaceRoleRecord(ctx, workspace)
	if err != nil {
		return nil, "", err
	}
	return l.ensureWorkspaceRoleFrom(ctx, workspace, incarnation, rec)
}

// ensureWorkspaceRoleFrom converges the role of workspace's incarnation from rec, the record of
// its role read under the lock.
func (l *Locked) ensureWorkspaceRoleFrom(ctx context.Context, workspace string, incarnation time.Time, rec workspaceRoleRecord) (*WorkspaceRole, string, error) {
	inst, err := l.admin.installation(ctx, l.Control())
	if err != nil {
		return nil, "", err
	}
	if rec.exists && !rec.incarnation.Equal(incarnation) {
		request.Reportf(ctx, l.rep, "workspace role "+rec.role, "dropping",
			"it was made for an earlier workspace %s (created %s)", workspace, rec.incarnation.UTC().Format(time.RFC3339))
		if err := l.DropWorkspaceRole(ctx, workspace); err != nil {
			return nil, "", fmt.Errorf("the role of an earlier workspace %q is still there: %w", workspace, err)
		}
		rec = workspaceRoleRecord{}
	}
	name := names.WorkspaceRole(inst, l.cluster.Name, workspace)
	if rec.exists && rec.role != name {
		return nil, "", request.Refusef("workspace %q is recorded with role %q on cluster %q, expected %q", workspace, rec.role, l.cluster.Name, name)
	}
	key := workspaceRoleKey{cluster: l.cluster.Name, hostPort: l.cluster.HostPort(), workspace: workspace, incarnation: incarnation, oid: rec.oid}
	if pw, ok := l.admin.roleCache.get(key); ok && rec.oid != 0 {
		return &WorkspaceRole{Cluster: l.cluster.Name, Workspace: workspace, Name: name, OID: rec.oid}, pw, nil
	}
	conn, release, err := l.maintenance(ctx)
	if err != nil {
		return nil, "", err
	}
	defer release()
	role := &WorkspaceRole{Cluster: l.cluster.Name, Workspace: workspace, Name: name}
	pw, err := l.convergeWorkspaceRole(ctx, conn, role, rec, workspaceRoleMarker(inst, workspace, incarnation), incarnation)
	if err != nil {
		return nil, "", err
	}
	if err := l.stillWanted(ctx, workspace, incarnation); err != nil {
		return nil, "", err
	}
	key.oid = role.OID
	l.admin.roleCache.put(key, pw)
	return role, pw, nil
}

// roleWanted is the one test of whether a workspace role (workspace ws, made for incarnation
// inc: SQL expressions) is still wanted: its workspace incarnation exists, or a create_fork is
// making it. DropWorkspaceRoles drops only roles that fail it; stillWanted re-checks it.
func roleWanted(ws, inc string) string {
	return `(EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = ` + ws + ` AND w.created_at = ` + inc + `)
	 OR EXISTS (SELECT FROM dataenv.requests q WHERE q.kind = 'create_fork' AND q.status IN ('pending', 'running')
	              AND q.args->>'fork' = ` + ws + ` AND q.created_at = ` + inc + `))`
}

var workspaceRoleWantedSQL = `SELECT ` + roleWanted("$1", "$2::timestamptz")

// stillWanted is checked after the role's record is written: a drop of the workspace that
// listed the roles before this record existed would miss it (DropWorkspaceRoles reads the
// records without the cluster's lock), so whoever comes second drops the role. A role made for a
// workspace that is gone is dropped at once and the caller is refused.
func (l *Locked) stillWanted(ctx context.Context, workspace string, incarnation time.Time) error {
	var wanted bool
	if err := l.Control().QueryRow(ctx, workspaceRoleWantedSQL, workspace, incarnation).Scan(&wanted); err != nil {
		return retryable(fmt.Errorf("check that workspace %q still exists: %w", workspace, err))
	}
	if wanted {
		return nil
	}
	if err := l.DropWorkspaceRole(ctx, workspace); err != nil {
		return fmt.Errorf("workspace %q was dropped while its role was made; dropping the role: %w", workspace, err)
	}
	return request.Refusef("workspace %q was dropped while its role on cluster %q was being made", workspace, l.cluster.Name)
}

// convergeWorkspaceRole is steps 2-4 of EnsureWorkspaceRole; role.OID is set on success.
func (l *Locked) convergeWorkspaceRole(ctx context.Context, conn *pgx.Conn, role *WorkspaceRole, rec workspaceRoleRecord,
	marker string, incarnation time.Time) (string, error) {
	id, err := readRoleIdentity(ctx, conn, role.Name)
	if err != nil {
		return "", err
	}
	switch {
	case id.exists && id.comment != marker:
		return "", request.Refusef("role %q exists on cluster %q without the marker of workspace %q (comment %q); dataenv does not take it over and left it untouched",
			role.Name, l.cluster.Name, role.Workspace, truncate(id.comment, 200))
	case id.exists && rec.oid != 0 && id.oid != rec.oid:
		return "", request.Refusef("role %q on cluster %q has OID %d, but dataenv recorded OID %d for workspace %q: it is not the role dataenv created; left untouched",
			role.Name, l.cluster.Name, id.oid, rec.oid, role.Workspace)
	case !id.exists && rec.oid != 0:
		// The recorded role is gone: a drop that stopped between DROP ROLE and removing the
		// record (a crash, a terminated session), or someone dropped it. The record's OID
		// describes nothing any more; the role made now is recorded in its place, or the next
		// call would refuse dataenv's own role as "not the role dataenv created".
		if _, err := l.Control().Exec(ctx, `UPDATE dataenv.workspace_roles SET role_oid = NULL WHERE cluster = $1 AND workspace = $2 AND role_oid = $3`,
			l.cluster.Name, role.Workspace, int64(rec.oid)); err != nil {
			return "", retryable(fmt.Errorf("forget the OID of the dropped role %q: %w", role.Name, err))
		}
		rec.oid = 0
	}
	if !rec.exists {
		if err := l.recordWorkspaceRole(ctx, role.Workspace, role.Name, incarnation); err != nil {
			return "", err
		}
	}
	pw, err := l.settleWorkspacePassword(ctx, conn, role, id, marker)
	if err != nil {
		return "", err
	}
	if id, err = readRoleIdentity(ctx, conn, role.Name); err != nil {
		return "", err
	}
	if err := alterWorkspaceRoleAttrs(ctx, conn, role.Name, id.attrs); err != nil {
		return "", err
	}
	role.OID = id.oid
	if rec.oid == 0 {
		if _, err := l.Control().Exec(ctx, `UPDATE dataenv.workspace_roles SET role_oid = $3 WHERE cluster = $1 AND workspace = $2`,
			l.cluster.Name, role.Workspace, int64(id.oid)); err != nil {
			return "", retryable(fmt.Errorf("record the OID of role %q: %w", role.Name, err))
		}
	}
	if err := l.ensureAdminMembership(ctx, conn, role.Name); err != nil {
		return "", err
	}
	return pw, nil
}

// settleWorkspacePassword creates the role (with its marker and password) when it does not exist,
// or gives it a password when none is settled; it returns the settled password.
func (l *Locked) settleWorkspacePassword(ctx context.Context, conn *pgx.Conn, role *WorkspaceRole, id roleIdentity, marker string) (string, error) {
	current, pending, err := l.readWorkspacePassword(ctx, role.Workspace)
	if err != nil {
		return "", err
	}
	if id.exists && current != "" && pending == "" {
		return current, nil
	}
	if pending, err = l.ensurePendingPassword(ctx, role.Workspace, pending); err != nil {
		return "", err
	}
	verifier, err := scramVerifier(pending)
	if err != nil {
		return "", err
	}
	if id.exists {
		if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(role.Name)+" PASSWORD "+quoteLiteral(verifier)); err != nil {
			return "", fmt.Errorf("set the password of role %q: %w", role.Name, err)
		}
	} else {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(role.Name)+workspaceRoleAttrs+" PASSWORD "+quoteLiteral(verifier)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(role.Name)+" IS "+quoteLiteral(marker))
			return err
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" {
			return "", retryable(fmt.Errorf("create role %q: created concurrently: %w", role.Name, err))
		}
		if err != nil {
			return "", fmt.Errorf("create role %q on cluster %q: %w", role.Name, l.cluster.Name, err)
		}
		crashpoint.HitOnce(CrashAfterCreateWorkspaceRole)
		request.Reportf(ctx, l.rep, "workspace role "+role.Name, StatusCreated, "on cluster %s for workspace %s", l.cluster.Name, role.Workspace)
	}
	if err := l.promoteWorkspacePassword(ctx, role.Workspace); err != nil {
		return "", err
	}
	return pending, nil
}

// alterWorkspaceRoleAttrs puts back LOGIN and takes away any attribute someone gave the role.
func alterWorkspaceRoleAttrs(ctx context.Context, conn *pgx.Conn, name string, a roleAttrs) error {
	var fix []string
	for _, c := range []struct {
		bad  bool
		attr string
	}{{!a.login, "LOGIN"}, {a.super, "NOSUPERUSER"}, {a.createDB, "NOCREATEDB"}, {a.createRole, "NOCREATEROLE"},
		{a.replication, "NOREPLICATION"}, {a.bypassRLS, "NOBYPASSRLS"}} {
		if c.bad {
			fix = append(fix, c.attr)
		}
	}
	if len(fix) == 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(name)+" "+strings.Join(fix, " ")); err != nil {
		return fmt.Errorf("reset the attributes of role %q (%s): %w", name, strings.Join(fix, " "), err)
	}
	return nil
}

// ensureAdminMembership makes the admin a member of role: with INHERIT and SET on PostgreSQL 16+
// (a CREATEROLE admin holds ADMIN OPTION on the roles it created and may grant itself that), a
// plain membership on 15. Nothing for a superuser.
func (l *Locked) ensureAdminMembership(ctx context.Context, conn *pgx.Conn, role string) error {
	admin, err := readAdminRole(ctx, conn)
	if err != nil {
		return retryable(err)
	}
	if admin.super {
		return nil
	}
	check := `SELECT pg_catalog.pg_has_role(current_user, $1, 'USAGE')`
	grant := "GRANT " + ident(role) + " TO CURRENT_USER"
	if admin.serverVersion >= 160000 {
		check = `SELECT pg_catalog.pg_has_role(current_user, $1, 'USAGE') AND pg_catalog.pg_has_role(current_user, $1, 'SET')`
		grant += " WITH INHERIT TRUE, SET TRUE"
	}
	var ok bool
	if err := conn.QueryRow(ctx, check, role).Scan(&ok); err != nil {
		return retryable(fmt.Errorf("check the admin's membership in %q: %w", role, err))
	}
	if ok {
		return nil
	}
	if _, err := conn.Exec(ctx, grant); err != nil {
		return fmt.Errorf("make the admin %q a member of %q: %w", admin.name, role, err)
	}
	return nil
}

// Passwords of the workspace roles, in dataenv.workspace_role_secrets.

func (l *Locked) readWorkspacePassword(ctx context.Context, workspace string) (current, pending string, err error) {
	err = l.Control().QueryRow(ctx, `SELECT coalesce(password, ''), coalesce(password_pending, '') FROM dataenv.workspace_role_secrets
		WHERE cluster = $1 AND workspace = $2`, l.cluster.Name, workspace).Scan(&current, &pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", retryable(fmt.Errorf("read the password state of the role of workspace %q: %w", workspace, err))
	}
	return current, pending, nil
}

func (l *Locked) saveWorkspacePassword(ctx context.Context, workspace, pw string) error {
	_, err := l.Control().Exec(ctx, `INSERT INTO dataenv.workspace_role_secrets (cluster, workspace, password_pending) VALUES ($1, $2, $3)
		ON CONFLICT (cluster, workspace) DO UPDATE SET password_pending = EXCLUDED.password_pending, updated_at = now()`,
		l.cluster.Name, workspace, pw)
	if err != nil {
		return retryable(fmt.Errorf("save the new password of the role of workspace %q: %w", workspace, err))
	}
	return nil
}

// ensurePendingPassword returns pending, or a new password saved as pending when there is none.
func (l *Locked) ensurePendingPassword(ctx context.Context, workspace, pending string) (string, error) {
	if pending != "" {
		return pending, nil
	}
	pending = newPassword()
	return pending, l.saveWorkspacePassword(ctx, workspace, pending)
}

// recordWorkspaceRole writes the record of workspace's role (no OID yet) before the role exists.
func (l *Locked) recordWorkspaceRole(ctx context.Context, workspace, role string, incarnation time.Time) error {
	if _, err := l.Control().Exec(ctx, `INSERT INTO dataenv.workspace_roles (cluster, workspace, role, incarnation) VALUES ($1, $2, $3, $4)`,
		l.cluster.Name, workspace, role, incarnation); err != nil {
		return retryable(fmt.Errorf("record the role of workspace %q: %w", workspace, err))
	}
	return nil
}

// promotePasswordSQL makes the pending password of workspace $2's role on cluster $1 the current one.
const promotePasswordSQL = `UPDATE dataenv.workspace_role_secrets SET password = password_pending, password_pending = NULL,
		updated_at = now() WHERE cluster = $1 AND workspace = $2 AND password_pending IS NOT NULL`

func (l *Locked) promoteWorkspacePassword(ctx context.Context, workspace string) error {
	_, err := l.Control().Exec(ctx, promotePasswordSQL, l.cluster.Name, workspace)
	if err != nil {
		return retryable(fmt.Errorf("promote the new password of the role of workspace %q: %w", workspace, err))
	}
	return nil
}
