// Package pipeline_test proves the request pipeline end to end: SQL in a real control database,
// the real dataenv sidecar binary tailing logical replication, outcomes written back.
package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"})
		if err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}

// controlDB is a fresh database with dataenv installed and the test kinds registered.
func controlDB(t *testing.T) (dsn string, conn *pgx.Conn) {
	t.Helper()
	db := pg.CreateDatabase(t)
	dsn = pg.DSN(db)
	sidecartest.Install(t, dsn)
	conn = pg.Connect(t, db)
	mustExec(t, conn, `
		CREATE SCHEMA dataenv_test;
		CREATE TABLE dataenv_test.effects (request_id uuid, effect text, attempt int, at timestamptz DEFAULT clock_timestamp());
		INSERT INTO dataenv.request_kinds (kind, description) VALUES ('test_effects', 'two side effects (tests only)')`)
	t.Cleanup(func() { dropSlot(conn) })
	return dsn, conn
}

// dropSlot removes the test database's slot so the database can be dropped.
func dropSlot(conn *pgx.Conn) { sidecartest.DropSlot(conn) }

func newRequest(t testing.TB, conn *pgx.Conn, kind, args string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	err := conn.QueryRow(context.Background(),
		`INSERT INTO dataenv.requests (kind, args) VALUES ($1, $2::jsonb) RETURNING id`, kind, args).Scan(&id)
	if err != nil {
		t.Fatalf("insert %s request: %v", kind, err)
	}
	return id
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustUUID(s string) uuid.UUID { return uuid.MustParse(s) }

// waitStreaming waits until a sidecar streams from the installation's slot: the slot exists with
// its consistent point (confirmed_flush_lsn is set once creation finished), so every request
// committed from now on is decoded, and the sidecar's walsender has it.
func waitStreaming(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	eventually(t, 30*time.Second, "the sidecar to stream from its slot", func() bool {
		return queryInt(t, conn, `SELECT count(*) FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = dataenv.slot_name() AND s.confirmed_flush_lsn IS NOT NULL`) == 1
	})
}

// SQL helpers of the test harness, by this package's names.
var (
	mustExec = testenv.MustExec
	queryInt = testenv.Query[int]
)
