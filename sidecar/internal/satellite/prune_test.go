package satellite_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/retention"
	"github.com/dataenv/dataenv/sidecar/internal/satellite"
	"github.com/dataenv/dataenv/tests/testenv"
)

// controlWithSatellites installs a control and n satellites of it, and returns a pool on the
// control and the satellites' database names.
func controlWithSatellites(t *testing.T, n int) (*pgxpool.Pool, []string) {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	control := pg.CreateDatabase(t)
	if _, err := install.Install(ctx, pg.Connect(t, control), install.Options{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	var sats []string
	for range n {
		db := pg.CreateDatabase(t)
		if _, err := install.InstallSatellite(ctx, pg.Connect(t, db), install.SatelliteOptions{ControlDatabase: control, Logger: quiet}); err != nil {
			t.Fatal(err)
		}
		sats = append(sats, db)
	}
	pool, err := pgxpool.New(ctx, pg.DSN(control))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, sats
}

// seedRequests writes, with the satellite's triggers off (no envelopes), 7 old finished
// requests, 3 recent finished ones and 2 old unfinished ones, told apart by their error text.
func seedRequests(t *testing.T, db string) {
	t.Helper()
	conn := pg.Connect(t, db)
	testenv.MustExec(t, conn, `SET session_replication_role = replica`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.requests (kind, status, created_at, finished_at, error)
		SELECT 'ping', (ARRAY['succeeded', 'failed', 'cancelled'])[1 + i % 3], now() - interval '10 days',
		       now() - interval '9 days', 'old' FROM generate_series(1, 7) i`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.requests (kind, status, finished_at, error)
		SELECT 'ping', 'succeeded', now() - interval '1 hour', 'recent' FROM generate_series(1, 3) i`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.requests (kind, status, created_at, error)
		SELECT 'ping', (ARRAY['pending', 'running'])[1 + i % 2], now() - interval '30 days', 'open'
		  FROM generate_series(1, 2) i`)
}

// counts returns how many requests of each seeded group db still has.
func counts(t *testing.T, db string) (old, recent, open int) {
	t.Helper()
	err := pg.Connect(t, db).QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE error = 'old'),
		count(*) FILTER (WHERE error = 'recent'), count(*) FILTER (WHERE error = 'open') FROM dataenv.requests`).Scan(&old, &recent, &open)
	if err != nil {
		t.Fatal(err)
	}
	return old, recent, open
}

// counterfeit makes a database that looks like a satellite (the same tables) but whose tables
// another role owns, registers it with the control and seeds it like a real one.
func counterfeit(t *testing.T, ctrl *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	owner, password := pg.CreateRole(t, "LOGIN")
	db := pg.CreateDatabaseOwnedBy(t, owner)
	conn := pg.ConnectAs(t, owner, password, db)
	testenv.MustExec(t, conn, `CREATE SCHEMA dataenv`)
	testenv.MustExec(t, conn, `CREATE TABLE dataenv.installation (id uuid NOT NULL DEFAULT gen_random_uuid())`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.installation DEFAULT VALUES`)
	testenv.MustExec(t, conn, `CREATE TABLE dataenv.requests (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), kind text,
		status text, error text, created_at timestamptz DEFAULT now(), finished_at timestamptz)`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.requests (kind, status, finished_at, error)
		SELECT 'ping', 'succeeded', now() - interval '9 days', 'old' FROM generate_series(1, 4) i`)
	var id string
	if err := conn.QueryRow(ctx, `SELECT id::text FROM dataenv.installation`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.Exec(ctx, `INSERT INTO dataenv.satellites (installation_id, database_oid, database_name, login_role, protocol)
		SELECT $2::uuid, d.oid, d.datname, 'dataenv_satellite_counterfeit_' || d.oid, 1 FROM pg_database d WHERE d.datname = $1`, db, id); err != nil {
		t.Fatal(err)
	}
	return db
}

// envelopeStillUnfinished files, behind the control's triggers, a pending envelope for one of the
// satellite's old finished requests (as after a sidecar stop between the two outcome writes) and
// returns its id.
func envelopeStillUnfinished(t *testing.T, ctrl *pgxpool.Pool, sat string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	satConn := pg.Connect(t, sat)
	var id, installation uuid.UUID
	if err := satConn.QueryRow(ctx, `SELECT r.id, i.id FROM dataenv.requests r, dataenv.installation i
		WHERE r.error = 'old' LIMIT 1`).Scan(&id, &installation); err != nil {
		t.Fatal(err)
	}
	conn := pg.Connect(t, controlOf(t, ctrl))
	testenv.MustExec(t, conn, `SET session_replication_role = replica`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.requests (id, kind, args, requested_by)
		VALUES ($1::uuid, 'satellite', jsonb_build_object('installation_id', $2::text, 'request_id', $1::text), current_user)`, id.String(), installation.String())
	return id
}

func controlOf(t *testing.T, ctrl *pgxpool.Pool) string {
	t.Helper()
	return ctrl.Config().ConnConfig.Database
}

// Retention prunes every registered satellite's finished requests past the retention, over the
// shared pool (one connection here for three databases), keeps recent finished and unfinished
// ones, and one whose envelope has not finished until it has, and never touches a database whose
// dataenv tables are not the installer's.
func TestRetentionPrunesSatellitesAndSkipsCounterfeits(t *testing.T) {
	ctrl, sats := controlWithSatellites(t, 2)
	for _, db := range sats {
		seedRequests(t, db)
	}
	fake := counterfeit(t, ctrl)
	awaiting := envelopeStillUnfinished(t, ctrl, sats[0])
	svc := satellite.New(satellite.Config{Control: ctrl, MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
	reg := metrics.NewRegistry()
	pruner := retention.New(retention.Config{Pool: ctrl, Retention: 7 * 24 * time.Hour, Batch: 3, Pause: time.Millisecond,
		Satellites: svc, Observer: metrics.New(reg), Logger: slog.New(slog.DiscardHandler)})
	if control, sats := pruner.Pass(context.Background()); control != 0 || sats != 13 {
		t.Fatalf("pruned %d control and %d satellite requests, want 0 and 13 (7 old finished in each of two satellites, one kept for its envelope)", control, sats)
	}
	if got := prunedMetric(t, reg, "satellite"); got != 13 {
		t.Errorf("dataenv_requests_pruned_total{installation=\"satellite\"} is %v, want 13", got)
	}
	for i, db := range sats {
		wantOld := 0
		if i == 0 {
			wantOld = 1 // the row whose envelope has not finished
		}
		if old, recent, open := counts(t, db); old != wantOld || recent != 3 || open != 2 {
			t.Errorf("satellite %s after the prune: %d old finished, %d recent finished, %d unfinished; want %d, 3, 2", db, old, recent, open, wantOld)
		}
	}
	var fakeOld int
	if err := pg.Connect(t, fake).QueryRow(context.Background(), `SELECT count(*) FROM dataenv.requests`).Scan(&fakeOld); err != nil {
		t.Fatal(err)
	}
	if fakeOld != 4 {
		t.Errorf("the counterfeit satellite has %d requests left, want its 4 untouched", fakeOld)
	}
	if open, _ := svc.Stats(); open > 1 {
		t.Errorf("%d satellite connections open, more than the pool's limit of 1", open)
	}
	p := retention.Policy{Retention: 7 * 24 * time.Hour, Batch: 3, Pause: time.Millisecond}
	if n := svc.PruneSatellites(context.Background(), p); n != 0 {
		t.Errorf("a second pass pruned %d", n)
	}
	testenv.MustExec(t, pg.Connect(t, controlOf(t, ctrl)), `UPDATE dataenv.requests SET status = 'succeeded', finished_at = now() WHERE id = $1`, awaiting)
	if n := svc.PruneSatellites(context.Background(), p); n != 1 {
		t.Errorf("once its envelope finished, a pass pruned %d, want the one row kept for it", n)
	}
}

// prunedMetric reads dataenv_requests_pruned_total for installation from reg.
func prunedMetric(t *testing.T, reg *prometheus.Registry, installation string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "dataenv_requests_pruned_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "installation" && l.GetValue() == installation {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no dataenv_requests_pruned_total{installation=%q}", installation)
	return 0
}
