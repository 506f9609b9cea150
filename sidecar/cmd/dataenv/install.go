package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

func runInstall(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newControlFlags("install", "Installs dataenv in the control database, or upgrades it: migrations, SQL API, publication.\n"+
		"With --control-database, installs (or upgrades) a satellite in the database of --dsn instead: its own request API, served by the control installation's sidecar.")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	controlDB := fs.String("control-database", "", "install a satellite registered with the control installation in this database of the same cluster")
	conn, err := fs.parseAndConnect(ctx, args)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if *controlDB != "" {
		rep, err := install.InstallSatellite(ctx, conn, install.SatelliteOptions{ControlDatabase: *controlDB, Logger: newLogger(*logLevel)})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "dataenv satellite installed in %s (schema version %d), served by the control installation in %s\n",
			conn.Config().Database, rep.ToVersion, *controlDB)
		return nil
	}
	rep, err := install.Install(ctx, conn, install.Options{Logger: newLogger(*logLevel)})
	if err != nil {
		return err
	}
	switch {
	case rep.FromVersion == 0:
		fmt.Fprintf(stdout, "dataenv installed (schema version %d)\n", rep.ToVersion)
	case len(rep.Applied) == 0:
		fmt.Fprintf(stdout, "dataenv is up to date (schema version %d); SQL API re-applied\n", rep.ToVersion)
	default:
		fmt.Fprintf(stdout, "dataenv upgraded to schema version %d (applied %s); SQL API re-applied\n", rep.ToVersion, strings.Join(rep.Applied, ", "))
	}
	return nil
}

func runUninstall(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newControlFlags("uninstall", "Removes dataenv from the control database: ends the sidecar's walsender, drops the slot, the publication and the dataenv schema.\nDatabases and roles dataenv created on clusters are left in place: drop them through the API first.\n"+
		"In a satellite's database it removes only that satellite. A control installation with satellites is removed only with --force.")
	force := fs.Bool("force", false, "remove the control installation even though satellites are registered with it (they then fail with \"control installation unavailable\")")
	conn, err := fs.parseAndConnect(ctx, args)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := install.UninstallWith(ctx, conn, install.UninstallOptions{Force: *force}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "dataenv uninstalled")
	return nil
}

func runStatus(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newControlFlags("status", "Prints dataenv.sidecar_status: each sidecar, the leader, heartbeat, confirmed LSN, retained WAL, readiness.")
	conn, err := fs.parseAndConnect(ctx, args)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT hostname, pid, version, leader, ready, round(extract(epoch FROM heartbeat_age))::int,
		coalesce(confirmed_lsn::text, '-'), coalesce(slot_retained_wal_bytes, 0), coalesce(schema_version, 0)
		FROM dataenv.sidecar_status WHERE heartbeat_age < interval '1 hour' ORDER BY leader DESC, heartbeat_at DESC`)
	if err != nil {
		return fmt.Errorf("read dataenv.sidecar_status: %w", err)
	}
	defer rows.Close()
	fmt.Fprintf(stdout, "%-20s %-8s %-12s %-7s %-6s %-9s %-14s %-14s %s\n", "HOST", "PID", "VERSION", "LEADER", "READY", "BEAT_AGO", "CONFIRMED_LSN", "RETAINED_WAL", "SCHEMA")
	n := 0
	for rows.Next() {
		var host, ver, lsn string
		var pid, age, schema int
		var lead, ready bool
		var retained int64
		if err := rows.Scan(&host, &pid, &ver, &lead, &ready, &age, &lsn, &retained, &schema); err != nil {
			return err
		}
		n++
		fmt.Fprintf(stdout, "%-20s %-8d %-12s %-7t %-6t %-9s %-14s %-14d %d\n", host, pid, ver, lead, ready, fmt.Sprintf("%ds", age), lsn, retained, schema)
	}
	if n == 0 {
		fmt.Fprintln(stdout, "no sidecar has reported in the last hour: start one with `dataenv sidecar --dsn ...`")
	}
	return rows.Err()
}

// controlFlags are the flags of a command that works on one connection to the control database.
type controlFlags struct {
	flagSet
	dsn *string
}

func newControlFlags(name, summary string) controlFlags {
	fs := newFlags(name, summary)
	return controlFlags{flagSet: fs, dsn: fs.String("dsn", "", "control database connection string")}
}

// parseAndConnect parses args and opens the connection to the control database named by --dsn.
func (fs controlFlags) parseAndConnect(ctx context.Context, args []string) (*pgx.Conn, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := requireDSN(*fs.dsn); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(*fs.dsn)
	if err != nil {
		return nil, fmt.Errorf("--dsn: %w", err)
	}
	// The database's owner may have set session defaults (role among them): the install acts as
	// the role it connects as, with the settings it expects.
	pgsession.Pin(cfg.RuntimeParams)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to control database: %w", err)
	}
	return conn, nil
}
