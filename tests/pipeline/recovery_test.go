package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/sidecartest"
)

// TestCrashPoints kills the sidecar with SIGKILL at each named point of a request with two side
// effects, restarts it, and checks the request ends exactly once with each effect done once.
func TestCrashPoints(t *testing.T) {
	points := []string{
		"dispatch.on_deliver",           // decoded, before dispatch
		"dispatch.after_claim",          // running committed, handler not started
		"test.between_effects",          // first side effect done, second not
		"test.after_effects",            // both done, outcome not written
		"dispatch.after_outcome_commit", // outcome committed, LSN not confirmed
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dsn, conn := controlDB(t)
			env := []string{"DATAENV_CRASH_AT=" + point, "DATAENV_CRASH_MARKER_DIR=" + t.TempDir()}
			first := sidecartest.Start(t, sidecartest.Options{DSN: dsn, Env: env})
			waitStreaming(t, conn) // the request must arrive through the stream, not the start-up re-read
			id := newRequest(t, conn, "test_effects", `{}`)
			if err := first.WaitExit(30 * time.Second); err != nil {
				t.Fatalf("the sidecar did not die at %s: %v", point, err)
			}
			sidecartest.Start(t, sidecartest.Options{DSN: dsn, Env: env}) // markers keep it from dying twice
			row := sidecartest.Wait(t, conn, id, 30*time.Second)
			if row.Status != "succeeded" {
				t.Fatalf("after a crash at %s the request is %s (error %v)", point, row.Status, row.Error)
			}
			for _, effect := range []string{"one", "two"} {
				if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects WHERE request_id = $1 AND effect = $2`, id, effect); n != 1 {
					t.Fatalf("after a crash at %s effect %s happened %d times, want once", point, effect, n)
				}
			}
			// The finished request is not run again once more requests flow.
			next := newRequest(t, conn, "test_effects", `{}`)
			sidecartest.Wait(t, conn, next, 30*time.Second)
			if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects WHERE request_id = $1`, id); n != 2 {
				t.Fatalf("the crashed request's effects changed to %d after later traffic", n)
			}
		})
	}
}

func TestSlotDroppedWhileSidecarDown(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sc := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	sidecartest.Wait(t, conn, newRequest(t, conn, "ping", `{}`), 30*time.Second)
	if err := sc.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	dropSlot(conn)
	var ids []string
	for range 5 {
		ids = append(ids, newRequest(t, conn, "test_effects", `{}`).String())
	}
	sc = sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	for _, id := range ids {
		row := sidecartest.Wait(t, conn, mustUUID(id), 30*time.Second)
		if row.Status != "succeeded" {
			t.Fatalf("request %s made while the slot was gone is %s", id, row.Status)
		}
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = dataenv.slot_name()`); n != 1 {
		t.Fatalf("slot not re-created")
	}
}

func TestStandbyTakesOverWhenLeaderIsKilled(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	a := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	eventually(t, 20*time.Second, "a leader", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM dataenv.sidecar_status WHERE leader AND ready`) == 1
	})
	b := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	eventually(t, 20*time.Second, "the standby to report", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM dataenv.sidecar_status WHERE pid = $1 AND NOT leader`, b.Pid()) == 1
	})
	a.Kill()
	var ids []string
	for range 20 {
		ids = append(ids, newRequest(t, conn, "test_effects", `{}`).String())
	}
	for _, id := range ids {
		if row := sidecartest.Wait(t, conn, mustUUID(id), 30*time.Second); row.Status != "succeeded" {
			t.Fatalf("request %s is %s after failover", id, row.Status)
		}
	}
	eventually(t, 10*time.Second, "the standby to report itself leader", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM dataenv.sidecar_status WHERE pid = $1 AND leader`, b.Pid()) == 1
	})
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects`); n != 40 {
		t.Fatalf("%d effects for 20 requests, want 40", n)
	}
}

func TestWalsenderTerminatedLosesNothing(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	sidecartest.Wait(t, conn, newRequest(t, conn, "ping", `{}`), 30*time.Second)
	var ids []string
	for range 3 {
		mustExec(t, conn, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = dataenv.slot_name() AND active_pid IS NOT NULL`)
		for range 5 {
			ids = append(ids, newRequest(t, conn, "test_effects", `{}`).String())
		}
	}
	for _, id := range ids {
		if row := sidecartest.Wait(t, conn, mustUUID(id), 60*time.Second); row.Status != "succeeded" {
			t.Fatalf("request %s is %s after walsender terminations", id, row.Status)
		}
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv_test.effects`); n != 2*len(ids) {
		t.Fatalf("%d effects for %d requests", n, len(ids))
	}
}

// TestIdleSlotRetainsNoWAL: with no dataenv traffic but other writes in the database, the slot's
// confirmed position follows the server's WAL end.
func TestIdleSlotRetainsNoWAL(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	sidecartest.Wait(t, conn, newRequest(t, conn, "ping", `{}`), 30*time.Second)
	mustExec(t, conn, `CREATE TABLE other_traffic (id bigserial, payload text)`)
	for range 20 {
		mustExec(t, conn, `INSERT INTO other_traffic (payload) SELECT repeat('x', 200) FROM generate_series(1, 2000)`)
	}
	var written int64
	if err := conn.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = dataenv.slot_name()`).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if written < 4<<20 {
		t.Fatalf("the other traffic wrote only %d bytes of WAL; the test proves nothing", written)
	}
	eventually(t, 30*time.Second, "the slot to confirm past the other traffic", func() bool {
		var behind int64
		_ = conn.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = dataenv.slot_name()`).Scan(&behind)
		return behind < 256<<10
	})
}

// TestSigtermDrainsRunningRequests: SIGTERM lets a running request finish, confirms the LSN and
// releases leadership (a second sidecar then leads).
func TestSigtermDrainsRunningRequests(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sc := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	id := newRequest(t, conn, "ping", `{"sleep_ms": 1500}`)
	// The gate's key must be the one dataenv.wait() queues on: hashtext of the id's text.
	eventually(t, 20*time.Second, "the gate of the sleeping ping", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND classid = dataenv.lock_class('gate')::oid AND objid = hashtext($1::text)::oid AND objsubid = 2`, id) == 1
	})
	if err := sc.Stop(30 * time.Second); err != nil {
		t.Fatalf("sidecar did not exit cleanly on SIGTERM: %v", err)
	}
	row := sidecartest.Wait(t, conn, id, time.Second)
	if row.Status != "succeeded" {
		t.Fatalf("the request running at SIGTERM is %s, want it finished", row.Status)
	}
	// The walsender notices the closed connection on its own schedule, so "inactive" comes
	// shortly after the exit, not with it.
	eventually(t, 10*time.Second, "the slot to be released after the sidecar exited", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = dataenv.slot_name() AND active`) == 0
	})
	b := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	sidecartest.Wait(t, conn, newRequest(t, conn, "ping", `{}`), 30*time.Second)
	eventually(t, 10*time.Second, "the new sidecar to lead", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM dataenv.sidecar_status WHERE pid = $1 AND leader`, b.Pid()) == 1
	})
	if n := queryInt(t, conn, `SELECT attempts FROM dataenv.requests WHERE id = $1`, id); n != 1 {
		t.Fatalf("the drained request ran %d times", n)
	}
}
