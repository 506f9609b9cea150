package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Step statuses of setup and of the other handlers' results.
const (
	StatusCreated     = "created"
	StatusUpdated     = "updated"
	StatusUnchanged   = "unchanged"
	StatusRefused     = "refused"
	StatusUnavailable = "unavailable"
	StatusAdopted     = "adopted"
	StatusDropped     = "dropped"
)

// StepResult is one step of a setup report.
type StepResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// SetupResult is the result of setup_cluster: a report per step; Changed is false when the run
// found everything converged.
type SetupResult struct {
	Cluster  string       `json:"cluster"`
	SetUpFor string       `json:"set_up_for"`
	Changed  bool         `json:"changed"`
	Steps    []StepResult `json:"steps"`
}

// adminRole is what setup needs to know about the connecting admin.
type adminRole struct {
	name                  string
	super, createRole     bool
	createDB, replication bool
	serverVersion         int
}

const adminRoleSQL = `
SELECT r.rolname, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
       pg_catalog.current_setting('server_version_num')::int
  FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`

func readAdminRole(ctx context.Context, conn *pgx.Conn) (adminRole, error) {
	var r adminRole
	err := conn.QueryRow(ctx, adminRoleSQL).Scan(&r.name, &r.super, &r.createRole, &r.createDB, &r.replication, &r.serverVersion)
	if err != nil {
		return r, fmt.Errorf("read the admin role: %w", err)
	}
	return r, nil
}

// canGrantReplication: PostgreSQL 15 lets only superusers create replication roles; 16 and newer
// also a CREATEROLE role that has REPLICATION itself.
func (r adminRole) canGrantReplication() bool {
	return r.super || (r.serverVersion >= 160000 && r.replication)
}

func (a *Admin) handleSetup(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args struct {
		Cluster string `json:"cluster"`
	}
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := checkNames(ctx, a.cfg.Control, req.Kind, "cluster", args.Cluster); err != nil {
		return nil, err
	}
	res, err := a.Setup(ctx, args.Cluster, rep)
	a.countSideEffect(metrics.OpSetupCluster, res != nil && res.Changed, err)
	if err != nil {
		a.log.Info("cluster setup did not succeed", "cluster", args.Cluster, "refused", request.IsRefused(err), "error", err.Error())
		return nil, err
	}
	a.log.Info("cluster setup done", "cluster", args.Cluster, "set_up_for", res.SetUpFor, "changed", res.Changed)
	return res, nil
}

// Setup converges the managed roles of cluster and records set_up_for; see the package doc.
func (a *Admin) Setup(ctx context.Context, cluster string, rep request.Reporter) (*SetupResult, error) {
	var res *SetupResult
	err := a.WithLifecycleLock(ctx, cluster, rep, func(ctx context.Context, l *Locked) error {
		var err error
		res, err = l.setup(ctx)
		return err
	})
	return res, err
}

func (l *Locked) setup(ctx context.Context) (*SetupResult, error) {
	c := l.cluster
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	admin, err := readAdminRole(ctx, conn)
	if err != nil {
		return nil, retryable(err)
	}
	if !admin.super && !(admin.createRole && admin.createDB) {
		return nil, request.Refusef("setup of cluster %q: the admin role %q needs CREATEDB and CREATEROLE (or superuser)", c.Name, admin.name)
	}
	res := &SetupResult{Cluster: c.Name}
	add := func(s StepResult) {
		res.Steps = append(res.Steps, s)
		request.Report(ctx, l.rep, s.Name, s.Status, s.Detail)
		if s.Status == StatusCreated || s.Status == StatusUpdated {
			res.Changed = true
		}
	}
	if err := l.setupRoles(ctx, conn, admin, add); err != nil {
		return nil, err
	}
	var refused []string
	for _, s := range res.Steps {
		if s.Status == StatusRefused {
			refused = append(refused, s.Name+": "+s.Detail)
		}
	}
	if len(refused) > 0 {
		return nil, request.Refusef("setup of cluster %q refused: %s", c.Name, strings.Join(refused, "; "))
	}
	s, err := l.recordSetUpFor(ctx)
	if err != nil {
		return nil, err
	}
	add(s)
	res.SetUpFor = c.HostPort()
	return res, nil
}

// setupRoles converges the application role, the replication role and the admin's membership
// in the application role, reporting each step through add.
func (l *Locked) setupRoles(ctx context.Context, conn *pgx.Conn, admin adminRole, add func(StepResult)) error {
	c := l.cluster
	app, err := l.convergeManagedRole(ctx, conn, managedRole{name: c.AppRole, secret: "app"})
	if err != nil {
		return err
	}
	add(app)
	repl, err := l.convergeManagedRole(ctx, conn, managedRole{name: c.ReplicationRole, secret: "replication",
		replication: true, canReplicate: admin.canGrantReplication()})
	if err != nil {
		return err
	}
	add(repl)
	if repl.Status != StatusRefused && !admin.canGrantReplication() {
		add(StepResult{Name: "replication attribute of role " + c.ReplicationRole, Status: StatusUnavailable,
			Detail: fmt.Sprintf("admin %q cannot grant REPLICATION (PostgreSQL 15 requires a superuser; 16+ an admin with "+
				"REPLICATION); it is needed only for triggers on external datatables", admin.name)})
	}
	if app.Status != StatusRefused {
		s, err := l.convergeMembership(ctx, conn, admin)
		if err != nil {
			return err
		}
		add(s)
	}
	return nil
}

// managedRole is one role setup converges.
type managedRole struct {
	name         string
	secret       string // column prefix in dataenv.cluster_secrets: app or replication
	replication  bool   // wants the REPLICATION attribute
	canReplicate bool   // the admin can grant it
}

type roleState struct {
	exists, login, replication bool
	comment                    string
	oid                        uint32
}

const roleStateSQL = `
SELECT r.rolcanlogin, r.rolreplication, coalesce(pg_catalog.shobj_description(r.oid, 'pg_authid'), ''), r.oid
  FROM pg_catalog.pg_roles r WHERE r.rolname = $1`

func readRoleState(ctx context.Context, q querier, name string) (roleState, error) {
	s := roleState{exists: true}
	err := q.QueryRow(ctx, roleStateSQL, name).Scan(&s.login, &s.replication, &s.comment, &s.oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return roleState{}, nil
	}
	if err != nil {
		return s, fmt.Errorf("read role %q: %w", name, err)
	}
	return s, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// convergeRole creates the role with the marker, or converges a marked one (password stored in
// the control database, LOGIN, REPLICATION when wanted and grantable); an unmarked role is
// refused and left untouched.
func (l *Locked) convergeRole(ctx context.Context, conn *pgx.Conn, r managedRole) (StepResult, error) {
	step := StepResult{Name: "role " + r.name}
	st, err := readRoleState(ctx, conn, r.name)
	if err != nil {
		return step, retryable(err)
	}
	if st.exists && !HasMarker(st.comment) {
		step.Status = StatusRefused
		step.Detail = fmt.Sprintf("role %q exists without dataenv's ownership marker (comment %q); dataenv does not take over "+
			"roles it did not create and left it untouched: drop or rename it, or pick other managed role names with "+
			"dataenv.update_cluster(app_role => ..., replication_role => ...)", r.name, names.Marker)
		return step, nil
	}
	current, pending, err := l.readRolePassword(ctx, r.secret)
	if err != nil {
		return step, err
	}
	if !st.exists {
		return l.createManagedRole(ctx, conn, r, step)
	}
	var changes []string
	if pending != "" || current == "" {
		if pending == "" {
			pending = newPassword()
			if err := l.saveRolePassword(ctx, r.secret, pending); err != nil {
				return step, err
			}
		}
		if err := setRolePassword(ctx, conn, r.name, pending); err != nil {
			return step, err
		}
		if err := l.promoteRolePassword(ctx, r.secret); err != nil {
			return step, err
		}
		changes = append(changes, "password set (none was stored, or a previous setup was interrupted)")
	}
	if attrs := missingAttributes(st, r); attrs != "" {
		if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(r.name)+attrs); err != nil {
			return step, fmt.Errorf("alter role %q: %w", r.name, err)
		}
		changes = append(changes, "attributes set:"+attrs)
	}
	if len(changes) == 0 {
		step.Status = StatusUnchanged
		step.Detail = "exists with dataenv's marker"
		return step, nil
	}
	step.Status = StatusUpdated
	step.Detail = strings.Join(changes, "; ")
	return step, nil
}

func missingAttributes(st roleState, r managedRole) string {
	var attrs string
	if !st.login {
		attrs += " LOGIN"
	}
	if r.replication && r.canReplicate && !st.replication {
		attrs += " REPLICATION"
	}
	return attrs
}

// createManagedRole creates the role, its password and its marker in one transaction, so that a
// crash never leaves an unmarked role behind; the password is saved as pending first.
func (l *Locked) createManagedRole(ctx context.Context, conn *pgx.Conn, r managedRole, step StepResult) (StepResult, error) {
	pw := newPassword()
	if err := l.saveRolePassword(ctx, r.secret, pw); err != nil {
		return step, err
	}
	verifier, err := scramVerifier(pw)
	if err != nil {
		return step, err
	}
	attrs := " LOGIN"
	if r.replication && r.canReplicate {
		attrs += " REPLICATION"
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(r.name)+attrs+" PASSWORD "+quoteLiteral(verifier)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(r.name)+" IS "+quoteLiteral(managedRoleMarker()))
		return err
	})
	if err != nil {
		return step, fmt.Errorf("create role %q: %w", r.name, err)
	}
	if err := l.promoteRolePassword(ctx, r.secret); err != nil {
		return step, err
	}
	step.Status = StatusCreated
	step.Detail = "created with" + attrs + " and dataenv's marker"
	return step, nil
}

func setRolePassword(ctx context.Context, conn *pgx.Conn, role, pw string) error {
	verifier, err := scramVerifier(pw)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+ident(role)+" PASSWORD "+quoteLiteral(verifier)); err != nil {
		return fmt.Errorf("set the password of role %q: %w", role, err)
	}
	return nil
}

// convergeMembership makes the admin a member of the application role, which CREATE DATABASE ...
// OWNER needs (PostgreSQL 16+: with SET and INHERIT; the admin holds ADMIN OPTION on roles it
// created). A superuser admin needs nothing.
func (l *Locked) convergeMembership(ctx context.Context, conn *pgx.Conn, admin adminRole) (StepResult, error) {
	app := l.cluster.AppRole
	step := StepResult{Name: fmt.Sprintf("membership of %s in %s", admin.name, app)}
	if admin.super {
		step.Status, step.Detail = StatusUnchanged, "the admin is a superuser"
		return step, nil
	}
	check := `SELECT pg_catalog.pg_has_role(current_user, $1, 'USAGE')`
	grant := "GRANT " + ident(app) + " TO CURRENT_USER"
	if admin.serverVersion >= 160000 {
		check = `SELECT pg_catalog.pg_has_role(current_user, $1, 'USAGE') AND pg_catalog.pg_has_role(current_user, $1, 'SET')`
		grant += " WITH INHERIT TRUE, SET TRUE"
	}
	var ok bool
	if err := conn.QueryRow(ctx, check, app).Scan(&ok); err != nil {
		return step, fmt.Errorf("check membership in %q: %w", app, err)
	}
	if ok {
		step.Status, step.Detail = StatusUnchanged, "already a member"
		return step, nil
	}
	if _, err := conn.Exec(ctx, grant); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			step.Status = StatusRefused
			step.Detail = fmt.Sprintf("the admin cannot grant itself %q (%s); on PostgreSQL 16+ it needs ADMIN OPTION on the role", app, pgErr.Message)
			return step, nil
		}
		return step, fmt.Errorf("grant %q to the admin: %w", app, err)
	}
	step.Status, step.Detail = StatusCreated, "granted"
	return step, nil
}

// recordSetUpFor records the host:port setup converged.
func (l *Locked) recordSetUpFor(ctx context.Context) (StepResult, error) {
	c := l.cluster
	step := StepResult{Name: "set_up_for"}
	tag, err := l.Control().Exec(ctx, `UPDATE dataenv.clusters SET set_up_for = $2, set_up_at = now(), updated_at = now()
		WHERE name = $1 AND set_up_for IS DISTINCT FROM $2`, c.Name, c.HostPort())
	if err != nil {
		return step, retryable(fmt.Errorf("record set_up_for of cluster %q: %w", c.Name, err))
	}
	if tag.RowsAffected() == 0 {
		step.Status, step.Detail = StatusUnchanged, c.HostPort()
	} else {
		step.Status, step.Detail = StatusUpdated, c.HostPort()
	}
	l.cluster.SetUpFor = c.HostPort()
	return step, nil
}

// Passwords of the managed roles, in dataenv.cluster_secrets (<secret>_password and
// <secret>_password_pending; secret is app or replication, never user input).

func (l *Locked) readRolePassword(ctx context.Context, secret string) (current, pending string, err error) {
	q := fmt.Sprintf(`SELECT coalesce(%[1]s, ''), coalesce(%[2]s, '') FROM dataenv.cluster_secrets WHERE cluster = $1`,
		ident(secret+"_password"), ident(secret+"_password_pending"))
	err = l.Control().QueryRow(ctx, q, l.cluster.Name).Scan(&current, &pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", retryable(fmt.Errorf("read the %s role's stored password state: %w", secret, err))
	}
	return current, pending, nil
}

func (l *Locked) saveRolePassword(ctx context.Context, secret, pw string) error {
	col := ident(secret + "_password_pending")
	q := fmt.Sprintf(`INSERT INTO dataenv.cluster_secrets (cluster, %[1]s) VALUES ($1, $2)
		ON CONFLICT (cluster) DO UPDATE SET %[1]s = EXCLUDED.%[1]s, updated_at = now()`, col)
	if _, err := l.Control().Exec(ctx, q, l.cluster.Name, pw); err != nil {
		return retryable(fmt.Errorf("save the %s role's new password: %w", secret, err))
	}
	return nil
}

func (l *Locked) promoteRolePassword(ctx context.Context, secret string) error {
	q := fmt.Sprintf(`UPDATE dataenv.cluster_secrets SET %[1]s = %[2]s, %[2]s = NULL, updated_at = now()
		WHERE cluster = $1 AND %[2]s IS NOT NULL`, ident(secret+"_password"), ident(secret+"_password_pending"))
	if _, err := l.Control().Exec(ctx, q, l.cluster.Name); err != nil {
		return retryable(fmt.Errorf("promote the %s role's new password: %w", secret, err))
	}
	return nil
}

// ident quotes an identifier with the driver's sanitizer.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
