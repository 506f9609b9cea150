package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// KindCheckCluster is the connection check register_cluster makes (dataenv.check_cluster).
const KindCheckCluster = "check_cluster"

// CheckResult is the result of a check_cluster request: what setup_cluster will find.
type CheckResult struct {
	Cluster       string   `json:"cluster"`
	HostPort      string   `json:"host_port"`
	AdminUser     string   `json:"admin_user"`
	ServerVersion string   `json:"server_version"`
	SSL           bool     `json:"ssl"`
	Superuser     bool     `json:"superuser"`
	CreateDB      bool     `json:"createdb"`
	CreateRole    bool     `json:"createrole"`
	Ready         bool     `json:"ready"` // set up for the current host:port
	Next          string   `json:"next"`
	Notes         []string `json:"notes,omitempty"`
}

// handleCheck connects to the cluster as its admin and reports what it found. Nothing is
// changed, and nothing is retried: a person acts on the error and checks again.
func (a *Admin) handleCheck(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args struct {
		Cluster string `json:"cluster"`
	}
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	var res *CheckResult
	err := a.WithLifecycleLock(ctx, args.Cluster, rep, func(ctx context.Context, l *Locked) error {
		var err error
		res, err = l.check(ctx)
		return err
	})
	if err != nil && !request.IsRefused(err) {
		return nil, request.Refusef("check_cluster: %v", err) // never retried: the check is for a person
	}
	return res, err
}

func (l *Locked) check(ctx context.Context) (*CheckResult, error) {
	c := l.cluster
	res := &CheckResult{Cluster: c.Name, HostPort: c.HostPort(), AdminUser: c.AdminUser, Ready: c.Ready()}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return nil, request.Refusef("check_cluster: cannot reach cluster %q at %s (sslmode %s): %v. %s",
			c.Name, c.HostPort(), c.SSLMode, err, connectHint(c, err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	admin, err := readAdminRole(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_setting('server_version'),
		coalesce((SELECT ssl FROM pg_catalog.pg_stat_ssl WHERE pid = pg_catalog.pg_backend_pid()), false)`).
		Scan(&res.ServerVersion, &res.SSL); err != nil {
		return nil, fmt.Errorf("read the server version: %w", err)
	}
	res.AdminUser, res.Superuser, res.CreateDB, res.CreateRole = admin.name, admin.super, admin.createDB, admin.createRole
	if !admin.super && (!admin.createDB || !admin.createRole) {
		return nil, request.Refusef("check_cluster: connected to cluster %q (PostgreSQL %s), but its admin_user %q lacks %s: setup_cluster "+
			"creates roles and create_database databases. On the cluster: ALTER ROLE %s CREATEDB CREATEROLE; then SELECT dataenv.check_cluster(%s)",
			c.Name, res.ServerVersion, admin.name, missingAdminAttributes(admin), ident(admin.name), quoteLiteral(c.Name))
	}
	if !admin.canGrantReplication() {
		res.Notes = append(res.Notes, "the admin cannot create a REPLICATION role here (PostgreSQL 15 needs a superuser, 16+ an admin with REPLICATION); setup_cluster reports it")
	}
	res.Next = fmt.Sprintf("SELECT dataenv.setup_cluster(%s)", quoteLiteral(c.Name))
	if res.Ready {
		res.Next = "the cluster is set up for " + c.HostPort() + "; create_database is next"
	}
	return res, nil
}

func missingAdminAttributes(r adminRole) string {
	var m []string
	if !r.createDB {
		m = append(m, "CREATEDB")
	}
	if !r.createRole {
		m = append(m, "CREATEROLE")
	}
	return strings.Join(m, " and ")
}

// connectHint says what to change for the kind of connection failure.
func connectHint(c *Cluster, err error) string {
	fix := func(what string) string {
		return fmt.Sprintf("Fix it with SELECT dataenv.update_cluster(%s, %s), then SELECT dataenv.check_cluster(%s); "+
			"a cluster not reachable yet may stay registered.", quoteLiteral(c.Name), what, quoteLiteral(c.Name))
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28"):
		return fix("admin_user => ..., admin_password => ...")
	case strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "tls") || strings.Contains(err.Error(), "SSL"):
		return fix("sslmode => ..., root_certificate_pem => ...")
	}
	return fix("host => ..., port => ...")
}
