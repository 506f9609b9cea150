// Package satellites_test proves satellite installations end to end: a control installation and
// satellites in other databases of one cluster, one real sidecar binary serving them all.
package satellites_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "satellites"})
		if err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}

// control is a control installation in a database of its own.
type control struct {
	DB, DSN string
	Conn    *pgx.Conn
}

func newControl(t *testing.T) control {
	t.Helper()
	db := pg.CreateDatabase(t)
	c := control{DB: db, DSN: pg.DSN(db)}
	sidecartest.Install(t, c.DSN)
	c.Conn = pg.Connect(t, db)
	t.Cleanup(func() { sidecartest.DropSlot(c.Conn) })
	return c
}

// satellite is a satellite installation registered with a control.
type satellite struct {
	DB, DSN             string
	Conn                *pgx.Conn
	UserRole, AdminRole string
}

func newSatellite(t *testing.T, c control) satellite {
	t.Helper()
	db := pg.CreateDatabase(t)
	return installSatellite(t, c, db)
}

func installSatellite(t *testing.T, c control, db string) satellite {
	t.Helper()
	s := satellite{DB: db, DSN: pg.DSN(db)}
	if err := tryInstallSatellite(s.DSN, c.DB); err != nil {
		t.Fatalf("install satellite in %s: %v", db, err)
	}
	s.Conn = pg.Connect(t, db)
	err := s.Conn.QueryRow(context.Background(), `SELECT user_role, admin_role FROM dataenv.satellite_roles()`).Scan(&s.UserRole, &s.AdminRole)
	if err != nil {
		t.Fatal(err)
	}
	login := testenv.QueryText(t, c.Conn, `SELECT login_role FROM dataenv.satellites
		WHERE database_oid = (SELECT oid FROM pg_database WHERE datname = $1)`, db)
	pg.DropRolesAtCleanup(t, s.UserRole, s.AdminRole, login)
	return s
}

func tryInstallSatellite(dsn, controlDB string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = install.InstallSatellite(ctx, conn, install.SatelliteOptions{ControlDatabase: controlDB, Logger: slog.New(slog.DiscardHandler)})
	return err
}

// user is a login role of the test.
type user struct{ Name, Password string }

func newUser(t *testing.T, grants ...string) user {
	t.Helper()
	name, pw := pg.CreateRole(t, "LOGIN")
	for _, g := range grants {
		testenv.MustExec(t, pg.Connect(t, "postgres"), fmt.Sprintf("GRANT %s TO %s", pgx.Identifier{g}.Sanitize(), pgx.Identifier{name}.Sanitize()))
	}
	return user{name, pw}
}

func (u user) connect(t *testing.T, db string) *pgx.Conn {
	return pg.ConnectAs(t, u.Name, u.Password, db)
}

func ping(t testing.TB, conn *pgx.Conn) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := conn.QueryRow(context.Background(), `SELECT dataenv.ping()`).Scan(&id); err != nil {
		t.Fatalf("dataenv.ping(): %v", err)
	}
	return id
}

func waitDone(t testing.TB, conn *pgx.Conn, id uuid.UUID) sidecartest.Row {
	t.Helper()
	return sidecartest.Wait(t, conn, id, 60*time.Second)
}

func waitStreaming(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the sidecar to stream from its slot", func() bool {
		return testenv.Query[int](t, conn, `SELECT count(*) FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid
			WHERE s.slot_name = dataenv.slot_name() AND s.confirmed_flush_lsn IS NOT NULL`) == 1
	})
}
