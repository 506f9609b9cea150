package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/testenv"
)

// An autovacuum worker on a database refuses DROP DATABASE ... WITH (FORCE) to an admin that is
// not a superuser (it may not end a process without a role); the drop still succeeds, the way
// a plain DROP DATABASE ends autovacuum workers. A cluster of its own, whose autovacuum wakes
// every second and crawls through one table, keeps a worker on the database for the test.
func TestDropWithTerminateOutlastsAnAutovacuumWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, err := testenv.StartPostgres(ctx, testenv.PGOptions{Name: "autovacuum", Settings: map[string]string{"autovacuum_naptime": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	admin, pw := pg.CreateRole(t, "LOGIN CREATEDB")
	ac := pg.ConnectAs(t, admin, pw, "postgres")
	const db = "vacuumed"
	if _, err := ac.Exec(ctx, "CREATE DATABASE "+ident(db)); err != nil {
		t.Fatal(err)
	}
	su := pg.Connect(t, db)
	for _, sql := range []string{
		`CREATE TABLE slow (id int) WITH (autovacuum_vacuum_cost_delay = 100, autovacuum_vacuum_cost_limit = 1)`,
		`INSERT INTO slow SELECT g FROM generate_series(1, 200000) g`,
		`DELETE FROM slow`,
	} {
		if _, err := su.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	su.Close(ctx)
	// The admin does not see other roles' processes' types: a superuser watches.
	watch := pg.Connect(t, "postgres")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var workers int
		if err := watch.QueryRow(ctx, `SELECT count(*)::int FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'autovacuum worker'`, db).Scan(&workers); err != nil {
			t.Fatal(err)
		}
		if workers > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no autovacuum worker came to the database")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := dropDatabase(ctx, ac, db, true); err != nil {
		t.Fatalf("drop with terminate while an autovacuum worker is on the database: %v", err)
	}
	var left int
	if err := watch.QueryRow(ctx, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db).Scan(&left); err != nil || left != 0 {
		t.Fatalf("database left after the drop: %d (%v)", left, err)
	}
}
