package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

func TestRowLevelSecurity(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	db := conn.Config().Database
	userA, pwA := pg.CreateRole(t, "LOGIN")
	userB, pwB := pg.CreateRole(t, "LOGIN")
	admin, pwAdmin := pg.CreateRole(t, "LOGIN")
	mustExec(t, conn, `GRANT dataenv_user TO `+pgx.Identifier{userA}.Sanitize()+`, `+pgx.Identifier{userB}.Sanitize())
	mustExec(t, conn, `GRANT dataenv_admin TO `+pgx.Identifier{admin}.Sanitize())
	a := pg.ConnectAs(t, userA, pwA, db)
	b := pg.ConnectAs(t, userB, pwB, db)
	adm := pg.ConnectAs(t, admin, pwAdmin, db)
	ctx := context.Background()

	var id uuid.UUID
	if err := a.QueryRow(ctx, `SELECT dataenv.ping()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if row := sidecartest.Wait(t, a, id, 30*time.Second); row.Status != "succeeded" {
		t.Fatalf("A's ping is %s", row.Status)
	}
	if n := queryInt(t, b, `SELECT count(*) FROM dataenv.requests WHERE id = $1`, id); n != 0 {
		t.Fatalf("B sees A's request")
	}
	for _, sql := range []string{`SELECT dataenv.wait($1, '1 s')`, `SELECT dataenv.cancel($1)`} {
		if _, err := b.Exec(ctx, sql, id); err == nil || !strings.Contains(err.Error(), "no request") {
			t.Fatalf("B ran %s on A's request: err = %v", sql, err)
		}
	}
	if _, err := b.Exec(ctx, `UPDATE dataenv.requests SET status = 'succeeded' WHERE id = $1`, id); err == nil {
		t.Fatalf("a user could write the status column")
	}
	if n := queryInt(t, adm, `SELECT count(*) FROM dataenv.requests WHERE id = $1`, id); n != 1 {
		t.Fatalf("the admin does not see A's request")
	}
	var pending uuid.UUID
	if err := a.QueryRow(ctx, `INSERT INTO dataenv.requests (kind, args) VALUES ('ping', '{"sleep_ms": 600000}') RETURNING id`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Exec(ctx, `SELECT dataenv.cancel($1)`, pending); err != nil {
		t.Fatalf("the admin cannot cancel A's request: %v", err)
	}
	if row := sidecartest.Wait(t, adm, pending, 30*time.Second); row.Status != "cancelled" {
		t.Fatalf("A's request cancelled by the admin is %s", row.Status)
	}
	var by string
	if err := a.QueryRow(ctx, `SELECT requested_by FROM dataenv.requests WHERE id = $1`, id).Scan(&by); err != nil || by != userA {
		t.Fatalf("requested_by = %q (%v), want %q", by, err, userA)
	}
}

// TestPostgresRestartLosesNothing restarts the control cluster under a running sidecar.
func TestPostgresRestartLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A cluster of its own: the package's shared cluster serves parallel tests.
	cluster, err := localpg.Start(ctx, localpg.Config{Name: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop(ctx) })
	dsn := cluster.DSN("postgres")
	sidecartest.Install(t, dsn)
	sc := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	sidecartest.Wait(t, conn, newRequest(t, conn, "ping", `{}`), 30*time.Second)
	conn.Close(ctx)

	if err := cluster.Restart(ctx); err != nil {
		t.Fatalf("restart cluster: %v", err)
	}
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ids []uuid.UUID
	for range 10 {
		ids = append(ids, newRequest(t, conn, "ping", `{}`))
	}
	for _, id := range ids {
		if row := sidecartest.Wait(t, conn, id, 60*time.Second); row.Status != "succeeded" {
			t.Fatalf("request %s is %s after the restart", id, row.Status)
		}
	}
	select {
	case <-sc.Exited():
		t.Fatalf("the sidecar exited when Postgres restarted")
	default:
	}
}
