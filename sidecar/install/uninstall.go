package install

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

const uninstallSQL = `
SELECT pg_terminate_backend(active_pid)
  FROM pg_catalog.pg_replication_slots
 WHERE slot_name = $1 AND active_pid IS NOT NULL`

// Uninstall ends the sidecar's walsender, drops its slot, the publication and the dataenv schema.
// Roles are cluster-wide and left in place; databases and roles dataenv created on other clusters
// are left too (drop them through the API first).
func Uninstall(ctx context.Context, conn *pgx.Conn) error {
	slot := SlotName(ctx, conn)
	return withInstallLock(ctx, conn, func() error {
		if _, err := conn.Exec(ctx, uninstallSQL, slot); err != nil {
			return fmt.Errorf("end the sidecar's walsender: %w", err)
		}
		if err := dropSlot(ctx, conn, slot); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, `DROP PUBLICATION IF EXISTS dataenv`); err != nil {
			return fmt.Errorf("drop publication dataenv: %w", err)
		}
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS dataenv CASCADE`); err != nil {
			return fmt.Errorf("drop schema dataenv: %w", err)
		}
		return nil
	})
}

// dropSlot drops the slot, retrying while the terminated walsender still holds it.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	const q = `SELECT pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`
	var err error
	for range 50 {
		if _, err = conn.Exec(ctx, q, slot); err == nil {
			return nil
		}
		if _, terr := conn.Exec(ctx, uninstallSQL, slot); terr != nil {
			break
		}
		if _, serr := conn.Exec(ctx, `SELECT pg_sleep(0.1)`); serr != nil {
			break
		}
	}
	return fmt.Errorf("drop replication slot %s: %w", slot, err)
}

// SlotName is the replication slot of the installation conn is connected to.
func SlotName(ctx context.Context, conn *pgx.Conn) string {
	var oid uint32
	_ = conn.QueryRow(ctx, `SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()`).Scan(&oid)
	return fmt.Sprintf("dataenv_%d", oid)
}
