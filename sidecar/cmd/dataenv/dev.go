package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/daemon"
	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/localpg"
)

func runDev(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("dev", "Starts (or reuses) a local PostgreSQL cluster under --dir, installs dataenv in database \"dataenv\" and runs the sidecar in the foreground. Ctrl-C stops the sidecar and the cluster; the data stays for next time.")
	dir := fs.String("dir", ".dataenv", "directory of the local cluster and object store")
	httpAddr := fs.String("http-addr", "127.0.0.1:9750", "listen address of /metrics, /healthz and /readyz")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger(*logLevel)
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	pg, err := localpg.Start(ctx, localpg.Config{Dir: filepath.Join(abs, "pg"), Name: "dev", Persistent: true, Logger: log})
	if err != nil {
		return fmt.Errorf("start local PostgreSQL: %w", err)
	}
	defer pg.Stop(context.WithoutCancel(ctx))
	dsn, err := devDatabase(ctx, pg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\ndataenv is running. Connect with:\n\n  psql '%s'\n\nThen try:\n\n  SELECT dataenv.ping() AS id \\gset\n  SELECT status, result FROM dataenv.wait(:'id');\n\nMetrics: http://%s/metrics   Stop: Ctrl-C\n\n", dsn, *httpAddr)
	return daemon.Run(ctx, daemon.Config{DSN: dsn, HTTPAddr: *httpAddr, Logger: log, Setup: setupHandlers})
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
