package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// A spare's database and objects belong to a role of its own (names.SpareRole), made with it and
// able to do nothing: NOLOGIN, no attribute, no membership but the admin's in it. A fork whose
// workspace has no role on the cluster yet takes both at once (CreateOptions.Adopt): the
// transaction that renames the spare's database into the fork's copy also renames the spare's
// role into the workspace's role and gives it the workspace role's login, password and marker.
// The copy's objects are then owned by the workspace role without one ALTER ... OWNER of the
// fork's own: on a schema of many tables that re-owning costs as much as the copy. A copy whose
// workspace role exists (a fork's second copy on the cluster, reset_fork) takes the spare too,
// renaming its role to a name of the copy's request (CreateOptions.SpareRoleAs); the copy's
// finish re-owns that role's objects, as it would a TEMPLATE copy's, and drops it, which saves the
// copy of the template.

const markedSpareRole = "spare role"

// EnsureSpareRole creates role for the spare built by request req (marked with the request),
// unless it is there with that marker already, and makes the admin a member, which re-owning the
// spare's objects to it needs. A role of that name without the marker is refused and left alone.
func (l *Locked) EnsureSpareRole(ctx context.Context, role string, req uuid.UUID) error {
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	marker := markerFor(markedSpareRole, req)
	id, err := readRoleIdentity(ctx, conn, role)
	if err != nil {
		return err
	}
	if id.exists && id.comment != marker {
		return request.Refusef("role %q exists on cluster %q without the marker of the spare built by request %s (comment %q); dataenv does not take it over",
			role, l.cluster.Name, req, truncate(id.comment, 200))
	}
	if !id.exists {
		if err := l.createMarkedRole(ctx, conn, markedSpareRole, role, marker, ""); err != nil {
			return err
		}
	}
	return l.ensureAdminMembership(ctx, conn, role)
}

// DropSpareRole drops the role of the spare built by request req, if it is there with that
// request's marker; a role renamed into a workspace role is not (its name is gone). The spare's
// database goes first: objects the role still owns refuse the drop.
func (l *Locked) DropSpareRole(ctx context.Context, role string, req uuid.UUID) error {
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	id, err := readRoleIdentity(ctx, conn, role)
	if err != nil || !id.exists {
		return err
	}
	if id.comment != markerFor(markedSpareRole, req) {
		return request.Refusef("role %q on cluster %q does not carry the marker of the spare built by request %s (comment %q); it is left alone",
			role, l.cluster.Name, req, truncate(id.comment, 200))
	}
	if _, err := conn.Exec(ctx, "DROP ROLE "+ident(role)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "2BP01" {
			return request.Refusef("spare role %q on cluster %q still owns objects or holds privileges: %s %s", role, l.cluster.Name, pgErr.Message, pgErr.Detail)
		}
		return retryable(fmt.Errorf("drop spare role %q on cluster %q: %w", role, l.cluster.Name, err))
	}
	return nil
}

// Adoption is a workspace role that a spare's role is to become (CreateOptions.Adopt), prepared
// by PrepareAdoption.
type Adoption struct {
	Workspace   string
	Role        string // the workspace role's name
	incarnation time.Time
	marker      string
	password    string // the role's pending password
	verifier    string // its SCRAM verifier
}

// ErrSpareDeclined: CreateMarkedDatabase was asked to adopt a spare's role (CreateOptions.Adopt)
// and the spare was not there as recorded, or the workspace role exists. Nothing was changed;
// the caller makes the workspace role (EnsureWorkspaceRoleAt) and creates the database without
// the spare.
var ErrSpareDeclined = errors.New("the spare and its role cannot be taken")

// PrepareAdoption prepares a fork copy of workspace's incarnation to take a spare with its role
// as the workspace's role on the cluster, when the workspace has no role recorded there (nil
// otherwise). Like EnsureWorkspaceRole it records the role (no OID yet) and saves its password as
// pending before the role exists, so whatever happens next converges in EnsureWorkspaceRoleAt:
// the role the take made is adopted by its marker, or made by CREATE ROLE when no spare was
// taken.
func (l *Locked) PrepareAdoption(ctx context.Context, workspace string, incarnation time.Time) (*Adoption, error) {
	rec, err := l.workspaceRoleRecord(ctx, workspace)
	if err != nil || rec.exists {
		return nil, err
	}
	inst, err := l.admin.installation(ctx, l.Control())
	if err != nil {
		return nil, err
	}
	a := &Adoption{Workspace: workspace, Role: names.WorkspaceRole(inst, l.cluster.Name, workspace), incarnation: incarnation,
		marker: workspaceRoleMarker(inst, workspace, incarnation)}
	if err := l.recordWorkspaceRole(ctx, workspace, a.Role, incarnation); err != nil {
		return nil, err
	}
	_, pending, err := l.readWorkspacePassword(ctx, workspace)
	if err != nil {
		return nil, err
	}
	if pending, err = l.ensurePendingPassword(ctx, workspace, pending); err != nil {
		return nil, err
	}
	a.password = pending
	if a.verifier, err = scramVerifier(pending); err != nil {
		return nil, err
	}
	return a, nil
}

// spareRolesSQL: the marker of role $1 (NULL: no such role), and whether role $2 exists.
const spareRolesSQL = `SELECT (SELECT coalesce(pg_catalog.shobj_description(oid, 'pg_authid'), '') FROM pg_catalog.pg_roles WHERE rolname = $1),
       EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = $2)`

// spareRoleTo is the name a spare's role takes when the spare is taken: the workspace role it
// becomes (Adopt), else SpareRoleAs ("" when neither is set: a spare with a role is not taken).
func (o CreateOptions) spareRoleTo() string {
	if o.Adopt != nil {
		return o.Adopt.Role
	}
	return o.SpareRoleAs
}

// spareRoleTakeable says whether spare sp's role can be renamed to role now: the spare's role is
// there with its marker, and no role of that name exists.
func spareRoleTakeable(ctx context.Context, conn *pgx.Conn, sp *Spare, role string) (bool, error) {
	if role == "" || sp.Role == "" {
		return false, nil
	}
	var marker *string
	var taken bool
	if err := conn.QueryRow(ctx, spareRolesSQL, sp.Role, role).Scan(&marker, &taken); err != nil {
		return false, retryable(fmt.Errorf("read roles %q and %q: %w", sp.Role, role, err))
	}
	return marker != nil && *marker == markerFor(markedSpareRole, sp.Request) && !taken, nil
}

// settleAdopted records what taking the spare made of its role: the workspace role's OID, its
// password settled, and the role remembered as converged, so that EnsureWorkspaceRoleAt finds it
// so without a connection of its own. The role keeps the admin's membership in the spare's role.
func (l *Locked) settleAdopted(ctx context.Context, conn *pgx.Conn, a *Adoption) error {
	var oid int64
	if err := conn.QueryRow(ctx, `SELECT oid::bigint FROM pg_catalog.pg_roles WHERE rolname = $1`, a.Role).Scan(&oid); err != nil {
		return retryable(fmt.Errorf("read the OID of role %q: %w", a.Role, err))
	}
	if _, err := l.Control().Exec(ctx, `WITH settled AS (`+promotePasswordSQL+`)
		UPDATE dataenv.workspace_roles SET role_oid = $3 WHERE cluster = $1 AND workspace = $2`,
		l.cluster.Name, a.Workspace, oid); err != nil {
		return retryable(fmt.Errorf("record the role %q a spare's role became: %w", a.Role, err))
	}
	if err := l.stillWanted(ctx, a.Workspace, a.incarnation); err != nil {
		return err
	}
	l.admin.roleCache.put(workspaceRoleKey{cluster: l.cluster.Name, hostPort: l.cluster.HostPort(), workspace: a.Workspace,
		incarnation: a.incarnation, oid: uint32(oid)}, a.password)
	return nil
}

// spareRoleStatements rename the spare's role, in takeSpare's transaction: into the workspace
// role, with its login, password and marker (opts.Adopt), or to opts.SpareRoleAs, marked for
// the taking request. None for a spare without a role.
func spareRoleStatements(sp *Spare, opts CreateOptions) []string {
	switch {
	case sp.Role == "":
		return nil
	case opts.Adopt != nil:
		a := opts.Adopt
		return []string{
			"ALTER ROLE " + ident(sp.Role) + " RENAME TO " + ident(a.Role),
			"ALTER ROLE " + ident(a.Role) + " LOGIN PASSWORD " + quoteLiteral(a.verifier),
			"COMMENT ON ROLE " + ident(a.Role) + " IS " + quoteLiteral(a.marker),
		}
	}
	return []string{
		"ALTER ROLE " + ident(sp.Role) + " RENAME TO " + ident(opts.SpareRoleAs),
		"COMMENT ON ROLE " + ident(opts.SpareRoleAs) + " IS " + quoteLiteral(markerFor(markedSpareRole, opts.Request)),
	}
}
