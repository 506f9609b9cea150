package retention_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/retention"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"})
		return err
	})
}

// Finished requests older than the retention go, in batches; recent ones, and unfinished ones
// however old, stay; a cancellation row goes with its request.
func TestPruneDeletesOnlyOldFinishedRequests(t *testing.T) {
	ctx := context.Background()
	db := pg.CreateDatabase(t)
	if _, err := install.Install(ctx, pg.Connect(t, db), install.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// 23 old finished (one cancelled with its cancellation row), 5 recent finished, 4 old
	// unfinished (pending and running).
	mustExec(t, pool, `INSERT INTO dataenv.requests (kind, status, created_at, finished_at, error)
		SELECT 'ping', (ARRAY['succeeded', 'failed', 'cancelled'])[1 + i % 3], now() - interval '10 days',
		       now() - interval '9 days', 'old' FROM generate_series(1, 23) i`)
	mustExec(t, pool, `INSERT INTO dataenv.requests (kind, status, finished_at, error)
		SELECT 'ping', 'succeeded', now() - interval '1 hour', 'recent' FROM generate_series(1, 5) i`)
	mustExec(t, pool, `INSERT INTO dataenv.requests (kind, status, created_at, error)
		SELECT 'ping', (ARRAY['pending', 'running'])[1 + i % 2], now() - interval '30 days', 'open'
		  FROM generate_series(1, 4) i`)
	mustExec(t, pool, `INSERT INTO dataenv.request_cancellations (request_id, requested_by)
		SELECT id, current_user FROM dataenv.requests WHERE status = 'cancelled' LIMIT 1`)

	p := retention.New(retention.Config{Pool: pool, Retention: 7 * 24 * time.Hour, Batch: 5, Pause: time.Millisecond})
	n, err := p.Prune(ctx)
	if err != nil || n != 23 {
		t.Fatalf("pruned %d, %v; want 23", n, err)
	}
	var recent, open, old, cancellations int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE error = 'recent'), count(*) FILTER (WHERE error = 'open'),
		count(*) FILTER (WHERE error = 'old'), (SELECT count(*) FROM dataenv.request_cancellations) FROM dataenv.requests`).
		Scan(&recent, &open, &old, &cancellations); err != nil {
		t.Fatal(err)
	}
	if recent != 5 || open != 4 || old != 0 || cancellations != 0 {
		t.Fatalf("after the prune: %d recent, %d unfinished, %d old finished, %d cancellations; want 5, 4, 0, 0", recent, open, old, cancellations)
	}
	if n, err := p.Prune(ctx); err != nil || n != 0 {
		t.Fatalf("a second prune deleted %d, %v", n, err)
	}
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
