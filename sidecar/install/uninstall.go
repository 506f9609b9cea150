package install

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// endSidecarSQL ends the sidecar's walsender and its leader-lock session, so that the running
// sidecar loses leadership (and, with the schema gone, cannot regain it or re-create the slot).
const endSidecarSQL = `
SELECT pg_terminate_backend(pid) FROM (
    SELECT active_pid AS pid FROM pg_catalog.pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL
    UNION
    SELECT pid FROM pg_catalog.pg_locks
     WHERE locktype = 'advisory' AND classid = $2 AND objid::integer = hashtext(current_database())
       AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
       AND granted
) s WHERE pid <> pg_backend_pid()`

// Uninstall removes the publication and the dataenv schema, ends the sidecar's sessions and drops
// its slot. Roles are cluster-wide and left in place; databases and roles dataenv created on other
// clusters are left too (drop them through the API first).
func Uninstall(ctx context.Context, conn *pgx.Conn) error {
	slot := SlotName(ctx, conn)
	return withInstallLock(ctx, conn, func() error {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `DROP PUBLICATION IF EXISTS dataenv, dataenv_requests`); err != nil {
				return fmt.Errorf("drop publications dataenv, dataenv_requests: %w", err)
			}
			if _, err := tx.Exec(ctx, `DROP SCHEMA IF EXISTS dataenv CASCADE`); err != nil {
				return fmt.Errorf("drop schema dataenv: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return dropSlot(ctx, conn, slot)
	})
}

// dropSlot ends the sidecar's sessions and drops the slot until it stays gone: a sidecar that was
// reconnecting at that moment may have re-created it once.
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	const drop = `SELECT count(pg_drop_replication_slot(slot_name)) FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`
	absent := 0
	var lastErr error
	for range 100 {
		if _, err := conn.Exec(ctx, endSidecarSQL, slot, leaderLockClass); err != nil {
			return fmt.Errorf("end the sidecar's sessions: %w", err)
		}
		var dropped int
		lastErr = conn.QueryRow(ctx, drop, slot).Scan(&dropped)
		if lastErr == nil && dropped == 0 {
			if absent++; absent == 3 {
				return nil
			}
		} else {
			absent = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("drop replication slot %s: %w", slot, lastErr)
}

// SlotName is the replication slot of the installation conn is connected to.
func SlotName(ctx context.Context, conn *pgx.Conn) string {
	var oid uint32
	_ = conn.QueryRow(ctx, `SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()`).Scan(&oid)
	return fmt.Sprintf("dataenv_%d", oid)
}
