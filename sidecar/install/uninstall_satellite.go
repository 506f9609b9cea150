package install

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
)

// UninstallOptions tune UninstallWith.
type UninstallOptions struct {
	// Force removes a control installation even though satellites are registered with it; they
	// then fail new requests with "control installation unavailable".
	Force  bool
	Logger *slog.Logger
}

// UninstallWith removes the installation conn is connected to: a satellite (only it: the control
// and the other satellites keep working), or the control installation, which it refuses while
// satellites are registered unless opts.Force.
func UninstallWith(ctx context.Context, conn *pgx.Conn, opts UninstallOptions) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	kind, err := installationKind(ctx, conn)
	if err != nil {
		return err
	}
	if kind == "satellite" {
		return uninstallSatellite(ctx, conn, opts.Logger)
	}
	if kind == "control" {
		if err := refuseWithSatellites(ctx, conn, opts); err != nil {
			return err
		}
	}
	return Uninstall(ctx, conn)
}

// refuseWithSatellites refuses to remove a control installation that satellites depend on; with
// Force it removes their login roles first (their envelopes then fail at once).
func refuseWithSatellites(ctx context.Context, conn *pgx.Conn, opts UninstallOptions) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('dataenv.satellites') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("look for satellites: %w", err)
	}
	if !exists {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT database_name::text, login_role::text FROM dataenv.satellites ORDER BY database_name`)
	if err != nil {
		return fmt.Errorf("list satellites: %w", err)
	}
	type sat struct{ DB, Role string }
	sats, err := pgx.CollectRows(rows, pgx.RowToStructByPos[sat])
	if err != nil {
		return fmt.Errorf("list satellites: %w", err)
	}
	if len(sats) == 0 {
		return nil
	}
	names := make([]string, len(sats))
	roles := make([]string, len(sats))
	for i, s := range sats {
		names[i], roles[i] = s.DB, s.Role
	}
	if !opts.Force {
		return fmt.Errorf("%d satellite installation(s) depend on this control installation (databases %s): uninstall them first (dataenv uninstall --dsn <satellite database>), or pass --force to leave them failing with \"control installation unavailable\"",
			len(sats), strings.Join(names, ", "))
	}
	opts.Logger.Warn("removing the control installation of satellites (forced)", "satellites", names)
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return dropLoginRoles(ctx, tx, roles) })
}

// uninstallSatellite drops the satellite's schema, then its registration and login role in the
// control database. The two are not one transaction: with the control unreachable the satellite
// is removed anyway and the stale registration is cleaned up by a later install.
func uninstallSatellite(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	var controlDB, role string
	err := conn.QueryRow(ctx, `SELECT i.control_database::text, coalesce((SELECT c.login_role::text FROM dataenv.control_credentials c), '')
		FROM dataenv.installation i`).Scan(&controlDB, &role)
	if err != nil {
		return fmt.Errorf("read the satellite's identity: %w", err)
	}
	err = withInstallLock(ctx, conn, func() error {
		_, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS dataenv CASCADE`)
		return err
	})
	if err != nil {
		return fmt.Errorf("drop schema dataenv: %w", err)
	}
	if role == "" {
		return nil
	}
	ctrl, err := connectControl(ctx, conn, controlDB)
	if err != nil {
		log.Warn("satellite removed; its registration in the control installation is left", "control_database", controlDB, "error", err)
		return nil
	}
	defer ctrl.Close(context.WithoutCancel(ctx))
	if kind, err := installationKind(ctx, ctrl); err != nil || kind != "control" {
		log.Warn("satellite removed; no control installation to deregister from", "control_database", controlDB, "error", err)
		return nil
	}
	err = pgx.BeginFunc(ctx, ctrl, func(tx pgx.Tx) error { return dropLoginRoles(ctx, tx, []string{role}) })
	if err != nil {
		return errors.Join(errors.New("satellite removed, but its registration in the control installation is left"), err)
	}
	return nil
}
