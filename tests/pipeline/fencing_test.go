package pipeline_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// The two proofs of issue 12. Each runs on a cluster of its own: one holds every commit of the
// cluster for a synchronous standby that never comes, the other a lock on template1.

// ownCluster starts a cluster for one test and installs dataenv in a database of it.
func ownCluster(t *testing.T, name string, settings map[string]string) (p *testenv.Postgres, dsn string, conn *pgx.Conn) {
	t.Helper()
	p, err := testenv.StartPostgres(context.Background(), testenv.PGOptions{Name: name, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	db := p.CreateDatabase(t)
	dsn = p.DSN(db)
	sidecartest.Install(t, dsn)
	conn = p.Connect(t, db)
	return p, dsn, conn
}

// TestInvisibleRequestIsClaimedOnceVisible: with synchronous_standby_names naming a standby that
// never connects, a request's commit is flushed and decoded while other sessions still cannot
// see the row. The sidecar's claim matches no row; it must keep the request until the row shows
// up, not judge it "handled elsewhere" and drop it (which left requests pending until a restart).
// The rescuer is parked, so only the claim path can finish the request.
func TestInvisibleRequestIsClaimedOnceVisible(t *testing.T) {
	t.Parallel()
	// Test clusters turn synchronous_commit off; a commit waits for a standby only with it on.
	p, dsn, admin := ownCluster(t, "ghost", map[string]string{"synchronous_commit": "on"})
	mustExec(t, admin, `SET synchronous_commit = local`) // the test's own commits never wait
	mustExec(t, admin, `INSERT INTO dataenv.request_kinds (kind, description) VALUES ('test_effects', 'tests')`)
	mustExec(t, admin, `CREATE SCHEMA dataenv_test; CREATE TABLE dataenv_test.effects (request_id uuid, effect text, attempt int)`)
	t.Cleanup(func() { dropSlot(admin) }) // registered first, so it runs after the sidecar is killed
	sc := sidecartest.Start(t, sidecartest.Options{DSN: dsn, Args: []string{"--rescue-interval", "1h"}})
	waitStreaming(t, admin)

	mustExec(t, admin, `ALTER SYSTEM SET synchronous_standby_names = 'ghost'`)
	mustExec(t, admin, `SELECT pg_reload_conf()`)
	t.Cleanup(func() {
		mustExec(t, admin, `ALTER SYSTEM RESET synchronous_standby_names`)
		mustExec(t, admin, `SELECT pg_reload_conf()`)
	})
	waitSyncRepInEffect(t, p, admin)
	inserter := p.Connect(t, admin.Config().Database)
	id := uuid.New()
	inserted := make(chan error, 1)
	go func() {
		_, err := inserter.Exec(context.Background(),
			`INSERT INTO dataenv.requests (id, kind, args) VALUES ($1, 'test_effects', '{}')`, id)
		inserted <- err
	}()
	// The insert's commit is flushed (so decoded) and waits for the standby: invisible.
	eventually(t, 30*time.Second, "the insert's commit to wait for the synchronous standby", func() bool {
		select {
		case err := <-inserted:
			t.Fatalf("the insert committed without waiting for the standby (%v): the setting is not in effect", err)
		default:
		}
		return queryInt(t, admin, `SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'SyncRep'`,
			inserter.PgConn().PID()) == 1
	})
	if n := queryInt(t, admin, `SELECT count(*)::int FROM dataenv.requests WHERE id = $1`, id); n != 0 {
		t.Fatalf("the waiting request is visible (%d rows): the test proves nothing", n)
	}
	// Wait until the sidecar has judged its claim: still trying (this code), or given up
	// ("handled elsewhere"/"letting it go", the bug).
	eventually(t, 60*time.Second, "the sidecar to judge its claim of the invisible request", func() bool {
		logs := sc.Logs()
		return strings.Contains(logs, "keeps matching no row") || strings.Contains(logs, "skipping it") ||
			strings.Contains(logs, "letting it go")
	})
	mustExec(t, admin, `ALTER SYSTEM RESET synchronous_standby_names`)
	mustExec(t, admin, `SELECT pg_reload_conf()`)
	if err := <-inserted; err != nil {
		t.Fatalf("insert: %v", err)
	}
	row := sidecartest.Wait(t, admin, id, 60*time.Second)
	if row.Status != "succeeded" || row.Attempts != 1 {
		t.Fatalf("the request that was invisible at its claim is %s at attempt %d, want succeeded at 1\n%s", row.Status, row.Attempts, sc.Logs())
	}
	if n := queryInt(t, admin, `SELECT count(*)::int FROM dataenv_test.effects WHERE request_id = $1`, id); n != 2 {
		t.Fatalf("%d effects, want 2", n)
	}
}

// TestNextLeaderWaitsOutTheKilledLeadersCreateDatabase: the sidecar is killed while its backend
// runs CREATE DATABASE (held up here by a lock on template1, so the kill lands inside it every
// time). That backend outlives its client; the next leader must end it and wait until it is
// gone before it creates the database itself: once, with no staging database left, instead of
// racing it into a unique violation (which failed the request).
func TestNextLeaderWaitsOutTheKilledLeadersCreateDatabase(t *testing.T) {
	t.Parallel()
	p, dsn, admin := ownCluster(t, "fence", nil)
	cluster := registerExternal(t, p, admin)
	t.Cleanup(func() { dropSlot(admin) }) // registered first, so it runs after the sidecars are killed
	a := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	row := sidecartest.Wait(t, admin, queryUUID(t, admin, `SELECT dataenv.setup_cluster($1)`, cluster), 60*time.Second)
	if row.Status != "succeeded" {
		t.Fatalf("setup_cluster: %s %v", row.Status, deref(row.Error))
	}

	holder := p.Connect(t, "postgres")
	mustExec(t, holder, `BEGIN`)
	mustExec(t, holder, `COMMENT ON DATABASE template1 IS 'held by the test'`) // blocks CREATE DATABASE's template lock
	name := "fenced_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	id := queryUUID(t, admin, `SELECT dataenv.create_database($1, $2)`, cluster, name)
	var pid int
	eventually(t, 60*time.Second, "attempt 1's CREATE DATABASE to wait on template1", func() bool {
		pid = queryInt(t, admin, `SELECT coalesce(max(pid), 0)::int FROM pg_stat_activity
			WHERE query LIKE 'CREATE DATABASE%' AND wait_event_type = 'Lock'`)
		return pid != 0
	})
	// Its session says whose it is: this request, attempt 1 (sidecar/internal/fence).
	if app := queryString(t, admin, `SELECT application_name FROM pg_stat_activity WHERE pid = $1`, pid); !strings.HasSuffix(app, "/"+hex.EncodeToString(id[:])+"/1") {
		t.Fatalf("attempt 1's backend is named %q", app)
	}
	a.Kill()
	alive := `SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1`
	if n := queryInt(t, admin, alive, pid); n != 1 {
		t.Fatalf("attempt 1's backend did not outlive its sidecar: the test proves nothing")
	}

	b := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	eventually(t, 60*time.Second, "the next leader to end attempt 1's backend", func() bool {
		return queryInt(t, admin, alive, pid) == 0
	})
	mustExec(t, holder, `ROLLBACK`)
	row = sidecartest.Wait(t, admin, id, 60*time.Second)
	if row.Status != "succeeded" || row.Attempts < 2 {
		t.Fatalf("create_database after the kill: %s at attempt %d (%v)\n%s", row.Status, row.Attempts, deref(row.Error), b.Logs())
	}
	ext := p.Connect(t, "postgres")
	if n := queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, name); n != 1 {
		t.Fatalf("%d databases %s", n, name)
	}
	if n := queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname LIKE 'dataenv\_tmp\_%'`); n != 0 {
		t.Fatalf("%d staging databases left", n)
	}
	if n := queryInt(t, admin, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1 AND created_by_request = $2`, name, id); n != 1 {
		t.Fatalf("%d records of %s", n, name)
	}
}

// waitSyncRepInEffect waits until commits wait for the synchronous standby: the reload reaches
// the server's processes asynchronously, so probe commits are made until one waits.
func waitSyncRepInEffect(t *testing.T, p *testenv.Postgres, admin *pgx.Conn) {
	t.Helper()
	mustExec(t, admin, `CREATE TABLE IF NOT EXISTS sync_probe (at timestamptz DEFAULT clock_timestamp())`)
	eventually(t, 60*time.Second, "a probe commit to wait for the synchronous standby", func() bool {
		probe := p.Connect(t, admin.Config().Database)
		done := make(chan struct{})
		go func() {
			_, _ = probe.Exec(context.Background(), `INSERT INTO sync_probe DEFAULT VALUES`)
			close(done)
		}()
		for {
			select {
			case <-done:
				return false // committed without waiting: not in effect yet
			default:
			}
			if queryInt(t, admin, `SELECT count(*)::int FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'SyncRep'`,
				probe.PgConn().PID()) == 1 {
				return true
			}
		}
	})
}

// registerExternal registers p as an external cluster administered by a managed-service-like
// admin (CREATEDB CREATEROLE, no superuser), with managed role names of the test's own.
func registerExternal(t *testing.T, p *testenv.Postgres, admin *pgx.Conn) string {
	t.Helper()
	user, pw := p.CreateManagedAdmin(t)
	rnd := strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	appRole, replRole := "dataenv_x"+rnd+"_app", "dataenv_x"+rnd+"_repl"
	p.DropRolesAtCleanup(t, appRole, replRole)
	prefix := p.NamePrefix(t)
	name := prefix + "ext"
	mustExec(t, admin, `SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable')`, name, p.Host(), p.Port(), user, pw)
	mustExec(t, admin, `SELECT dataenv.update_cluster($1, app_role => $2, replication_role => $3)`, name, appRole, replRole)
	return name
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

var (
	queryUUID   = testenv.Query[uuid.UUID]
	queryString = testenv.QueryText
)
