package app

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/localpg"
)

// DevConfig configures a local development instance.
type DevConfig struct {
	Dir    string // holds the local cluster (pg/) and object store; kept between runs
	Stdout io.Writer
	Config // the sidecar's; DSN is set to the local cluster's database "dataenv"
}

// Dev starts (or reuses) a local PostgreSQL cluster under cfg.Dir, installs dataenv in its
// database "dataenv" and runs the sidecar until ctx ends, then stops the cluster.
func Dev(ctx context.Context, cfg DevConfig) error {
	abs, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return err
	}
	pg, err := localpg.Start(ctx, localpg.Config{Dir: filepath.Join(abs, "pg"), Name: "dev", Persistent: true, Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("start local PostgreSQL: %w", err)
	}
	defer pg.Stop(context.WithoutCancel(ctx))
	dsn, err := devDatabase(ctx, pg)
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Stdout, "\ndataenv is running. Connect with:\n\n  psql '%s'\n\nThen try:\n\n  SELECT dataenv.ping() AS id \\gset\n  SELECT status, result FROM dataenv.wait(:'id');\n\nMetrics: http://%s/metrics   Stop: Ctrl-C\n\n", dsn, cfg.HTTPAddr)
	cfg.Config.DSN = dsn
	return Run(ctx, cfg.Config)
}

// devDatabase creates database "dataenv" when missing and installs dataenv in it.
func devDatabase(ctx context.Context, pg *localpg.Cluster) (string, error) {
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to local PostgreSQL: %w", err)
	}
	var exists bool
	_ = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'dataenv')`).Scan(&exists)
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE dataenv`); err != nil {
			conn.Close(ctx)
			return "", fmt.Errorf("create database dataenv: %w", err)
		}
	}
	conn.Close(ctx)
	dsn := pg.DSN("dataenv")
	ic, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer ic.Close(ctx)
	if _, err := install.Install(ctx, ic, install.Options{}); err != nil {
		return "", fmt.Errorf("install dataenv: %w", err)
	}
	return dsn, nil
}
