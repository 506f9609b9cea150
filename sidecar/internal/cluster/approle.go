package cluster

import (
	"context"
	"fmt"

	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/jackc/pgx/v5"
)

// AppConnConfig is the configuration of a connection to database of the cluster as the managed
// application role (the owner of the databases dataenv creates; what jobs and datatable
// attaches use), with the password setup stored and the same TLS and search_path rules as the
// admin's. It carries the password: never log it. Refused before a successful setup.
func (l *Locked) AppConnConfig(ctx context.Context, database string) (*pgx.ConnConfig, error) {
	if err := l.cluster.checkReady(); err != nil {
		return nil, request.Refusef("connect as the application role: %v", err)
	}
	pw, pending, err := l.readRolePassword(ctx, "app")
	if err != nil {
		return nil, err
	}
	if pw == "" || pending != "" {
		return nil, request.Refusef("cluster %q: the application role's password is not settled; run dataenv.setup_cluster(%s)",
			l.cluster.Name, quoteLiteral(l.cluster.Name))
	}
	cfg, err := l.admin.connConfig(l.cluster, database)
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password = l.cluster.AppRole, pw
	return cfg, nil
}

// AppLibpq is the libpq environment of database as the managed application role (for a restore
// that must run as the role owning what it creates, never as the admin: code the restore runs,
// a CHECK constraint or a generated column, could otherwise RESET ROLE to the admin). It carries
// the password; close it when the child has exited.
func (l *Locked) AppLibpq(ctx context.Context, database string) (*Libpq, error) {
	if err := l.admin.fenceForLibpq(ctx, l); err != nil {
		return nil, err
	}
	cfg, err := l.AppConnConfig(ctx, database)
	if err != nil {
		return nil, err
	}
	return l.admin.libpqFor(l.cluster, cfg, appName(l.attempt))
}

// ConnectApp opens a connection to database as the managed application role; see AppConnConfig.
func (l *Locked) ConnectApp(ctx context.Context, database string) (*pgx.Conn, error) {
	cfg, err := l.AppConnConfig(ctx, database)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database %q of cluster %q as %q: %w", cfg.Database, l.cluster.Name, cfg.User,
			scrub(err, cfg.Password))
	}
	return conn, nil
}
