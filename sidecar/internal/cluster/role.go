package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Crash points of the datatable role side effects.
const (
	CrashAfterCreateRole = "cluster.create_datatable_role.after_create"
	// CrashFailRoleReread makes the first re-read of a datatable role just created fail, as a
	// server restarting between CREATE ROLE and that read does.
	CrashFailRoleReread = "cluster.create_datatable_role.fail_reread"
	CrashAfterDropRole  = "cluster.drop_datatable_role.after_drop"
)

// RoleOutcome is the result of a datatable role request.
type RoleOutcome struct {
	Cluster string `json:"cluster"`
	Role    string `json:"role"`
	Status  string `json:"status"` // created, adopted, unchanged, dropped
	Detail  string `json:"detail,omitempty"`
}

type roleArgs struct {
	Cluster     string  `json:"cluster"`
	Role        string  `json:"role"`
	Description *string `json:"description"`
}

func (a *Admin) roleArgs(ctx context.Context, req *request.Request) (roleArgs, error) {
	var args roleArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return args, err
	}
	return args, checkNames(ctx, a.cfg.Control, req.Kind, "cluster", args.Cluster, "role", args.Role)
}

func (a *Admin) handleCreateDatatableRole(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	args, err := a.roleArgs(ctx, req)
	if err != nil {
		return nil, err
	}
	var out *RoleOutcome
	err = a.WithLifecycleLock(ctx, args.Cluster, rep, func(ctx context.Context, l *Locked) error {
		var err error
		out, err = l.createDatatableRole(ctx, args, req.ID)
		return err
	})
	if err != nil {
		a.finish(ctx, rep, metrics.OpCreateDatatableRole, "role "+args.Role, "", "", err)
		return nil, err
	}
	a.finish(ctx, rep, metrics.OpCreateDatatableRole, "role "+args.Role, out.Status, out.Detail, nil)
	return out, nil
}

func (a *Admin) handleDropDatatableRole(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	args, err := a.roleArgs(ctx, req)
	if err != nil {
		return nil, err
	}
	if args.Description != nil {
		return nil, request.Refusef("drop_datatable_role: unknown argument description")
	}
	var out *RoleOutcome
	err = a.WithLifecycleLock(ctx, args.Cluster, rep, func(ctx context.Context, l *Locked) error {
		var err error
		out, err = l.dropDatatableRole(ctx, args.Role, req.Attempts > 1)
		return err
	})
	if err != nil {
		a.finish(ctx, rep, metrics.OpDropDatatableRole, "role "+args.Role, "", "", err)
		return nil, err
	}
	a.finish(ctx, rep, metrics.OpDropDatatableRole, "role "+args.Role, out.Status, out.Detail, nil)
	return out, nil
}

func (l *Locked) roleRecord(ctx context.Context, role string) (record, error) {
	return l.readRecord(ctx, roleRecordSQL, "role", role)
}

// createDatatableRole: check (record, role on the cluster), act (CREATE ROLE + marker + GRANT to
// the application role in one transaction), record. A re-run adopts a role only if it carries
// this request's marker.
func (l *Locked) createDatatableRole(ctx context.Context, args roleArgs, req uuid.UUID) (*RoleOutcome, error) {
	c := l.cluster
	out := &RoleOutcome{Cluster: c.Name, Role: args.Role}
	if err := c.checkReady(); err != nil {
		return nil, request.Refusef("create datatable role %q: %v", args.Role, err)
	}
	rec, err := l.roleRecord(ctx, args.Role)
	if err != nil {
		return nil, err
	}
	if rec.Exists() && rec.Request != req {
		return nil, request.Refusef("datatable role %q already exists on cluster %q (created by request %s)", args.Role, c.Name, rec.Request)
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	marker := markerFor(markedDatatableRole, req)
	st, err := readRoleState(ctx, conn, args.Role)
	if err != nil {
		return nil, retryable(err)
	}
	switch {
	case rec.Exists():
		if !st.exists || st.comment != marker {
			return nil, request.Refusef("datatable role %q on cluster %q is recorded as created by this request but is missing or its marker changed", args.Role, c.Name)
		}
		if err := l.checkIdentity(ctx, conn, "role", args.Role, rec, st.oid, 0); err != nil {
			return nil, err
		}
		out.Status, out.Detail = StatusUnchanged, "already created by this request"
		return out, nil
	case st.exists && st.comment != marker:
		return nil, request.Refusef("role %q already exists on cluster %q and was not created by this request; dataenv does not take it over", args.Role, c.Name)
	case st.exists:
		out.Status, out.Detail = StatusAdopted, "created by this request before an interruption; recorded now"
	default:
		if err := l.createMarkedRole(ctx, conn, markedDatatableRole, args.Role, marker, c.AppRole); err != nil {
			return nil, err
		}
		out.Status, out.Detail = StatusCreated, "NOLOGIN, granted to "+c.AppRole
	}
	crashpoint.HitOnce(CrashAfterCreateRole)
	// A failed read says nothing about the role (a restarting server): the next attempt finds it
	// with this request's marker and adopts it.
	if st, err = readRoleState(ctx, conn, args.Role); err == nil {
		err = crashpoint.FailOnce(CrashFailRoleReread)
	}
	if err != nil {
		return nil, retryable(err)
	}
	if !st.exists || st.comment != marker {
		return nil, request.Refusef("datatable role %q on cluster %q changed while it was being created; dataenv does not record it", args.Role, c.Name)
	}
	_, err = l.Control().Exec(ctx, `INSERT INTO dataenv.datatable_roles (cluster, role, description, created_by_request, role_oid)
		VALUES ($1, $2, $3, $4, $5)`, c.Name, args.Role, args.Description, req, st.oid)
	if err != nil {
		return nil, retryable(fmt.Errorf("record datatable role %q: %w", args.Role, err))
	}
	return out, nil
}

// createMarkedRole creates role (NOLOGIN and nothing else) of kind with its marker, granted to
// grantee ("": to nobody), in one transaction.
func (l *Locked) createMarkedRole(ctx context.Context, conn *pgx.Conn, kind, role, marker, grantee string) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(role)+" NOLOGIN"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(role)+" IS "+quoteLiteral(marker)); err != nil {
			return err
		}
		if grantee == "" {
			return nil
		}
		_, err := tx.Exec(ctx, "GRANT "+ident(role)+" TO "+ident(grantee))
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42710" || pgErr.Code == "23505") {
		// The role appeared after the check: an earlier attempt of this request, or someone else.
		// Transient: the next attempt fences and checks again (and refuses a role not ours).
		return retryable(fmt.Errorf("role %q appeared on cluster %q while it was being created; checking again: %w", role, l.cluster.Name, err))
	}
	if err != nil {
		return fmt.Errorf("create %s %q on cluster %q: %w", kind, role, l.cluster.Name, err)
	}
	return nil
}

// dropDatatableRole drops a recorded role carrying the recorded request's marker, then removes
// the record. Objects or privileges still held by the role refuse the drop (PostgreSQL's detail
// says which). After an interrupted attempt (interrupted), no record and no role means an earlier
// attempt of this request finished the drop.
func (l *Locked) dropDatatableRole(ctx context.Context, role string, interrupted bool) (*RoleOutcome, error) {
	c := l.cluster
	out := &RoleOutcome{Cluster: c.Name, Role: role}
	rec, err := l.roleRecord(ctx, role)
	if err != nil {
		return nil, err
	}
	notOurs := request.Refusef("role %q on cluster %q was not created by dataenv (no record in dataenv.datatable_roles); it is left alone", role, c.Name)
	if !rec.Exists() && !interrupted {
		return nil, notOurs
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	st, err := readRoleState(ctx, conn, role)
	if err != nil {
		return nil, retryable(err)
	}
	if !rec.Exists() {
		if st.exists {
			return nil, notOurs
		}
		out.Status, out.Detail = StatusDropped, "already dropped by an earlier attempt of this request"
		return out, nil
	}
	if err := l.checkIdentity(ctx, conn, "role", role, rec, st.oid, 0); err != nil {
		return nil, err
	}
	out.Status = StatusDropped
	if st.exists {
		if st.comment != markerFor(markedDatatableRole, rec.Request) {
			return nil, request.Refusef("role %q on cluster %q does not carry dataenv's marker for request %s; it is left alone", role, c.Name, rec.Request)
		}
		if _, err := conn.Exec(ctx, "DROP ROLE "+ident(role)); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "2BP01" {
				return nil, request.Refusef("role %q on cluster %q still owns objects or holds privileges: %s %s", role, c.Name, pgErr.Message, pgErr.Detail)
			}
			return nil, fmt.Errorf("drop role %q on cluster %q: %w", role, c.Name, err)
		}
		crashpoint.HitOnce(CrashAfterDropRole)
	} else {
		out.Detail = "already gone from the cluster; record removed"
	}
	if _, err := l.Control().Exec(ctx, `DELETE FROM dataenv.datatable_roles WHERE cluster = $1 AND role = $2`, c.Name, role); err != nil {
		return nil, retryable(fmt.Errorf("remove the record of role %q: %w", role, err))
	}
	return out, nil
}
