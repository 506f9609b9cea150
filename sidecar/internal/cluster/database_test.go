package cluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

func dbArgs(f *fixture, name string) map[string]any {
	return map[string]any{"cluster": f.name, "name": name}
}

func TestCreateDatabaseNeedsSetupOnTheCurrentHostPort(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := f.prefix + "db"
	_, err, _ := f.run(cluster.KindCreateDatabase, dbArgs(f, db))
	if !request.IsRefused(err) || !strings.Contains(err.Error(), "not set up") {
		t.Fatalf("create before setup: %v", err)
	}
	if err := f.sqlErr(`SELECT dataenv.create_database($1, $2)`, f.name, db); err == nil || !strings.Contains(err.Error(), "not set up") {
		t.Fatalf("SQL create before setup: %v", err)
	}
	f.setup()

	// The port changes: setup must run again first.
	f.exec(`SELECT dataenv.update_cluster($1, port => $2)`, f.name, external.Port()+1)
	_, err, _ = f.run(cluster.KindCreateDatabase, dbArgs(f, db))
	if !request.IsRefused(err) || !strings.Contains(err.Error(), "not set up for") {
		t.Fatalf("create after a port change: %v", err)
	}
	if err := f.sqlErr(`SELECT dataenv.create_database($1, $2)`, f.name, db); err == nil {
		t.Fatal("SQL create after a port change was accepted")
	}
	f.exec(`SELECT dataenv.update_cluster($1, port => $2)`, f.name, external.Port())

	id := uuid.New()
	res, err, _ := f.runID(id, cluster.KindCreateDatabase, dbArgs(f, db))
	if err != nil || res.(*cluster.DatabaseOutcome).Status != cluster.StatusCreated {
		t.Fatalf("create after setup: %v %+v", err, res)
	}
	ext := f.ext()
	if c := queryString(t, ext, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, db); !strings.HasPrefix(c, names.Marker) || !strings.Contains(c, id.String()) {
		t.Fatalf("database comment %q", c)
	}
	if owner := queryString(t, ext, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, db); owner != f.appRole {
		t.Fatalf("owner %q, want %q", owner, f.appRole)
	}
	if rec := queryString(t, f.sql, `SELECT created_by_request::text FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2`, f.name, db); rec != id.String() {
		t.Fatalf("record %q", rec)
	}
	// The same request again (a re-delivery) converges.
	res, err, _ = f.runID(id, cluster.KindCreateDatabase, dbArgs(f, db))
	if err != nil || res.(*cluster.DatabaseOutcome).Status != cluster.StatusUnchanged {
		t.Fatalf("rerun: %v %+v", err, res)
	}
	// Another request for the same name is refused.
	if _, err, _ := f.run(cluster.KindCreateDatabase, dbArgs(f, db)); !request.IsRefused(err) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second create: %v", err)
	}
}

func TestDropDatabaseGuards(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()

	// A database created by hand: no record, refused, untouched.
	hand := f.prefix + "hand"
	mustExec(t, ext, "CREATE DATABASE "+ident(hand))
	if _, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, hand)); !request.IsRefused(err) || !strings.Contains(err.Error(), "not created by dataenv") {
		t.Fatalf("drop of a hand-made database: %v", err)
	}
	if err := f.sqlErr(`SELECT dataenv.drop_database($1, $2)`, f.name, hand); err == nil {
		t.Fatal("SQL drop of a hand-made database accepted")
	}

	// A database owner who writes dataenv's marker on a database dataenv did not create.
	owner, pw := external.CreateRole(t, "LOGIN CREATEDB")
	forged := f.prefix + "forged"
	oc := external.ConnectAs(t, owner, pw, "postgres")
	mustExec(t, oc, "CREATE DATABASE "+ident(forged))
	mustExec(t, oc, "COMMENT ON DATABASE "+ident(forged)+" IS 'managed by dataenv; database; request "+uuid.NewString()+"'")
	if _, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, forged)); !request.IsRefused(err) {
		t.Fatalf("drop of a forged-marker database: %v", err)
	}
	for _, db := range []string{hand, forged} {
		if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 1 {
			t.Fatalf("database %s was dropped", db)
		}
	}

	// A dataenv database named by a datatable and a lake (uses plugged in the way the workspace
	// and lake areas do): refused with every use listed, dropped once they are gone.
	db := f.prefix + "used"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	f.exec(`CREATE TABLE public.test_uses (cluster text, database text, kind text, name text)`)
	f.exec(`CREATE FUNCTION dataenv.managed_database_uses__test(cluster text, database text)
		RETURNS TABLE (kind text, name text, detail text) LANGUAGE sql STABLE AS
		$$ SELECT u.kind, u.name, 'workspace w1' FROM public.test_uses u WHERE u.cluster = $1 AND u.database = $2 $$`)
	f.exec(`INSERT INTO public.test_uses VALUES ($1, $2, 'datatable', 'dt_main'), ($1, $2, 'lake catalog', 'lake_main')`, f.name, db)
	res, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, db))
	if !request.IsRefused(err) || !strings.Contains(err.Error(), "datatable dt_main") || !strings.Contains(err.Error(), "lake catalog lake_main") {
		t.Fatalf("drop of a used database: %v", err)
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_database_uses($1, $2)`, f.name, db); n != 2 {
		t.Fatalf("managed_database_uses: %d rows", n)
	}
	f.exec(`DELETE FROM public.test_uses WHERE kind = 'datatable'`)
	_, err, _ = f.run(cluster.KindDropDatabase, dbArgs(f, db))
	if !request.IsRefused(err) || strings.Contains(err.Error(), "dt_main") || !strings.Contains(err.Error(), "lake_main") {
		t.Fatalf("drop with the lake left: %v", err)
	}
	f.exec(`DELETE FROM public.test_uses`)

	// A connected session refuses the drop (listed); terminate_sessions ends it.
	su := external.Connect(t, db)
	_, err, _ = f.run(cluster.KindDropDatabase, dbArgs(f, db))
	if !request.IsRefused(err) || !strings.Contains(err.Error(), "connected session") || !strings.Contains(err.Error(), external.SuperUser) {
		t.Fatalf("drop with a session: %v", err)
	}
	args := dbArgs(f, db)
	args["terminate_sessions"] = true
	// The admin may not end a superuser's session: a clear refusal.
	if _, err, _ := f.run(cluster.KindDropDatabase, args); !request.IsRefused(err) || !strings.Contains(err.Error(), "may not terminate") {
		t.Fatalf("terminate a superuser session: %v", err)
	}
	su.Close(f.ctx)
	eventually(t, func() bool {
		return queryInt(t, ext, `SELECT count(*)::int FROM pg_stat_activity WHERE datname = $1`, db) == 0
	})
	// A session of the application role is ended.
	pw = queryString(t, f.sql, `SELECT app_password FROM dataenv.cluster_secrets WHERE cluster = $1`, f.name)
	_ = external.ConnectAs(t, f.appRole, pw, db)
	res, err, _ = f.run(cluster.KindDropDatabase, args)
	if err != nil || res.(*cluster.DatabaseOutcome).Status != cluster.StatusDropped {
		t.Fatalf("drop: %v %+v", err, res)
	}
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 0 ||
		queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1`, db) != 0 {
		t.Fatal("database or record left after the drop")
	}
}

func TestDropRefusedWhenTheOwnerRewritesTheMarker(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	db := f.prefix + "db"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	// The application role owns the database and can rewrite its comment, e.g. to another
	// request's marker: the drop no longer matches the record and is refused.
	mustExec(t, f.ext(), "COMMENT ON DATABASE "+ident(db)+" IS 'managed by dataenv; database; request "+uuid.NewString()+"'")
	if _, err, _ := f.run(cluster.KindDropDatabase, dbArgs(f, db)); !request.IsRefused(err) || !strings.Contains(err.Error(), "marker") {
		t.Fatalf("drop after the marker was rewritten: %v", err)
	}
}

func TestCreateDatabaseConvergesAfterACrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	ext := f.ext()

	// Crash after CREATE of the staging database, before the marker and rename.
	id := uuid.New()
	db := f.prefix + "a"
	staging := "dataenv_tmp_" + strings.ReplaceAll(id.String(), "-", "")
	mustExec(t, ext, "CREATE DATABASE "+ident(staging)+" OWNER "+ident(f.appRole))
	res, err, _ := f.runID(id, cluster.KindCreateDatabase, dbArgs(f, db))
	if err != nil || res.(*cluster.DatabaseOutcome).Status != cluster.StatusCreated {
		t.Fatalf("rerun after a crash before the rename: %v %+v", err, res)
	}
	if queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname IN ($1, $2)`, db, staging) != 1 ||
		queryInt(t, ext, `SELECT count(*)::int FROM pg_database WHERE datname = $1`, db) != 1 {
		t.Fatal("staging database left behind or target missing")
	}

	// Crash after CREATE + marker + rename, before the control record: adopted, recorded once.
	id2 := uuid.New()
	db2 := f.prefix + "b"
	mustExec(t, ext, "CREATE DATABASE "+ident(db2)+" OWNER "+ident(f.appRole))
	mustExec(t, ext, "COMMENT ON DATABASE "+ident(db2)+" IS 'managed by dataenv; database; request "+id2.String()+"'")
	res, err, _ = f.runID(id2, cluster.KindCreateDatabase, dbArgs(f, db2))
	if err != nil || res.(*cluster.DatabaseOutcome).Status != cluster.StatusAdopted {
		t.Fatalf("rerun after a crash before the record: %v %+v", err, res)
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1 AND created_by_request = $2`, db2, id2); n != 1 {
		t.Fatalf("%d records", n)
	}

	// The same state with another request's marker is not adopted.
	db3 := f.prefix + "c"
	mustExec(t, ext, "CREATE DATABASE "+ident(db3)+" OWNER "+ident(f.appRole))
	mustExec(t, ext, "COMMENT ON DATABASE "+ident(db3)+" IS 'managed by dataenv; database; request "+uuid.NewString()+"'")
	if _, err, _ := f.run(cluster.KindCreateDatabase, dbArgs(f, db3)); !request.IsRefused(err) {
		t.Fatalf("adopted a database of another request: %v", err)
	}
	if n := queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1`, db3); n != 0 {
		t.Fatal("recorded a database of another request")
	}
}

func TestConcurrentCreatesOfOneName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	db := f.prefix + "same"
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i], _ = f.run(cluster.KindCreateDatabase, dbArgs(f, db))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !request.IsRefused(err) || !strings.Contains(err.Error(), "already exists"):
			t.Fatalf("a concurrent create failed uncleanly: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d creates succeeded: %v", ok, errs)
	}
	if queryInt(t, f.ext(), `SELECT count(*)::int FROM pg_database WHERE datname = $1 OR datname LIKE 'dataenv\_tmp\_%' AND pg_get_userbyid(datdba) = $2`, db, f.appRole) != 1 ||
		queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1`, db) != 1 {
		t.Fatal("not exactly one database and one record")
	}
}

func TestWaitingForTheLifecycleLockIsAStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	held, err := lock.Lifecycle(f.ctx, f.pool, f.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{notify: make(chan request.Step, 16)}
	done := make(chan error, 1)
	go func() {
		h, _ := f.reg.Lookup(cluster.KindCreateDatabase)
		_, err := h.Handle(f.ctx, newRequest(cluster.KindCreateDatabase, dbArgs(f, f.prefix+"w")), rec)
		done <- err
	}()
	s := <-rec.notify
	if s.Status != "waiting" || !strings.Contains(s.Name, f.name) {
		t.Fatalf("first step %+v", s)
	}
	if err := held.Release(f.ctx); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range rec.notify {
		}
	}()
	if err := <-done; err != nil {
		t.Fatalf("create after the lock was released: %v", err)
	}
}

func TestSQLFunctionsTakeTheSameLifecycleLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held, err := lock.Lifecycle(f.ctx, f.pool, f.name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	tx, err := f.sql.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(f.ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(f.ctx, `SELECT dataenv.update_cluster($1, port => 1)`, f.name)
	if err == nil || !strings.Contains(err.Error(), "55P03") {
		t.Fatalf("update_cluster while the sidecar holds the lock: %v", err)
	}
}

func TestDropConvergesAfterACrashBetweenDropAndRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	db := f.prefix + "gone"
	f.mustRun(cluster.KindCreateDatabase, dbArgs(f, db))
	// The database is dropped, the sidecar dies before removing the record: the re-run converges.
	mustExec(t, f.ext(), "DROP DATABASE "+ident(db))
	res := f.mustRun(cluster.KindDropDatabase, dbArgs(f, db)).(*cluster.DatabaseOutcome)
	if res.Status != cluster.StatusDropped || !strings.Contains(res.Detail, "already gone") {
		t.Fatalf("rerun of the drop: %+v", res)
	}
	if queryInt(t, f.sql, `SELECT count(*)::int FROM dataenv.managed_databases WHERE name = $1`, db) != 0 {
		t.Fatal("record left")
	}
}

func TestDatatableRoleAdoptedAfterACrashBeforeTheRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	id := uuid.New()
	role := f.prefix + "r"
	mustExec(t, f.ext(), "CREATE ROLE "+ident(role))
	mustExec(t, f.ext(), "COMMENT ON ROLE "+ident(role)+" IS 'managed by dataenv; datatable role; request "+id.String()+"'")
	res, err, _ := f.runID(id, cluster.KindCreateDatatableRole, map[string]any{"cluster": f.name, "role": role})
	if err != nil || res.(*cluster.RoleOutcome).Status != cluster.StatusAdopted {
		t.Fatalf("rerun: %v %+v", err, res)
	}
	// Another request does not adopt it.
	if _, err, _ := f.run(cluster.KindCreateDatatableRole, map[string]any{"cluster": f.name, "role": role}); !request.IsRefused(err) {
		t.Fatalf("second request: %v", err)
	}
}

// TestPrepareRunsBeforeTheDatabaseIsHandedOver: CreateOptions.Prepare runs in the new database
// while it is the admin's and closed to PUBLIC, on a session whose search_path is the server's
// default (extension scripts read it); the database is then its owner's, marked and recorded.
func TestPrepareRunsBeforeTheDatabaseIsHandedOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.setup()
	db := f.prefix + "prepared"
	var seen struct {
		owner, searchPath string
		publicConnects    bool
	}
	err := f.admin.WithLifecycleLock(f.ctx, f.name, nil, func(ctx context.Context, l *cluster.Locked) error {
		_, err := l.CreateMarkedDatabase(ctx, db, cluster.CreateOptions{Request: uuid.New(), Private: true,
			Prepare: func(ctx context.Context, _ *cluster.Locked, conn *pgx.Conn) error {
				return conn.QueryRow(ctx, `SELECT pg_get_userbyid(datdba), current_setting('search_path'),
					has_database_privilege('public', datname, 'CONNECT') FROM pg_database WHERE datname = current_database()`).
					Scan(&seen.owner, &seen.searchPath, &seen.publicConnects)
			}})
		return err
	})
	if err != nil {
		t.Fatalf("create with Prepare: %v", err)
	}
	if seen.owner != f.adminUser || seen.publicConnects || seen.searchPath != `"$user", public` {
		t.Fatalf("Prepare saw owner %q, PUBLIC may connect %v, search_path %q; want the admin %q, false, the server's default",
			seen.owner, seen.publicConnects, seen.searchPath, f.adminUser)
	}
	if owner := queryString(t, f.ext(), `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, db); owner != f.appRole {
		t.Fatalf("owner after the handover %q, want %q", owner, f.appRole)
	}
	if rec := queryString(t, f.sql, `SELECT count(*)::text FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2`, f.name, db); rec != "1" {
		t.Fatalf("%s records of the prepared database", rec)
	}
}
