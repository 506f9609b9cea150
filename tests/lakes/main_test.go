// Package lakes_test proves storages, lakes, the ducklake:// resolver, run and materialize, and
// the lake side of forks end to end: SQL in a real control database, the real dataenv sidecar,
// the real dataenv-runner with the DuckLake extension, a catalog in a harness Postgres, data on a
// local directory and on a real S3 server.
package lakes_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	pg         *testenv.Postgres
	s3         *testenv.S3
	runnerPath string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		if s3, err = testenv.StartS3(ctx); err != nil {
			return err
		}
		if runnerPath, err = testenv.BuildRunner(ctx); err != nil {
			return err
		}
		os.Setenv(client.EnvRunnerPath, runnerPath)
		_, err = sidecartest.Binary()
		return err
	})
}

// env is one test's installation: a control database with dataenv installed, a catalog database
// registered through the instance cluster, and (optionally) a running sidecar.
type env struct {
	t       *testing.T
	dsn     string
	conn    *pgx.Conn
	catalog string
	sidecar *sidecartest.Process
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := pg.CreateDatabase(t)
	e := &env{t: t, dsn: pg.DSN(db)}
	sidecartest.Install(t, e.dsn)
	e.conn = pg.Connect(t, db)
	e.catalog = pg.CreateDatabase(t)
	t.Cleanup(func() { dropSlot(e.conn) })
	t.Cleanup(func() { dropWorkspaceRoles(t, e.conn) })
	return e
}

// dropWorkspaceRoles drops the workspace roles the installation's sidecar created on the harness
// cluster (their names carry the installation's hash, not the test's prefix).
func dropWorkspaceRoles(t *testing.T, conn *pgx.Conn) {
	ctx := context.Background()
	rows, err := conn.Query(ctx, `SELECT rolname::text FROM pg_roles
		WHERE shobj_description(oid, 'pg_authid') LIKE '%workspace role; installation ' || (SELECT id::text FROM dataenv.installation) || ';%'`)
	if err != nil {
		t.Errorf("list the workspace roles: %v", err)
		return
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	// One at a time: DROP OWNED BY a, b of two roles that share a default ACL entry (one's
	// default privileges granted to the other) fails with "could not find tuple for default ACL".
	for _, r := range roles {
		if err == nil {
			err = pg.DropRoles(ctx, r)
		}
	}
	if err != nil {
		t.Errorf("drop the workspace roles: %v", err)
	}
}

// setupInstance sets up the instance cluster with managed role names of the test's own (dropped
// at cleanup), so that its application role exists: what a datatable's workspace role mirrors.
// It returns the application role.
func (e *env) setupInstance() string {
	e.t.Helper()
	prefix := pg.NamePrefix(e.t)
	app, repl := "dataenv_"+prefix+"app", "dataenv_"+prefix+"repl"
	pg.DropRolesAtCleanup(e.t, app, repl)
	mustExec(e.t, e.conn, `SELECT dataenv.update_cluster('instance', app_role => $1, replication_role => $2)`, app, repl)
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.setup_cluster('instance')`).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	if row := e.wait(id); row.Status != "succeeded" {
		e.t.Fatalf("setup_cluster('instance'): %s %s", row.Status, deref(row.Error))
	}
	return app
}

// startSidecar starts the real sidecar on the env's control database.
func (e *env) startSidecar(extra ...string) {
	e.t.Helper()
	e.sidecar = sidecartest.Start(e.t, sidecartest.Options{DSN: e.dsn,
		Env: append([]string{client.EnvRunnerPath + "=" + runnerPath}, extra...)})
}

// workspace creates a workspace, or a fork of parent through dataenv.create_fork (the
// workspaces area's request, whose commit calls the lake hook dataenv.fork_created__lakes).
func (e *env) workspace(id, parent string, sharedLakes ...string) {
	e.t.Helper()
	if parent == "" {
		mustExec(e.t, e.conn, `SELECT dataenv.create_workspace($1)`, id)
		return
	}
	if row := e.createFork(id, parent, sharedLakes...); row.Status != "succeeded" {
		e.t.Fatalf("create_fork %s: %s %s", id, row.Status, deref(row.Error))
	}
}

// createFork makes fork of parent through dataenv.create_fork and returns the request row.
func (e *env) createFork(id, parent string, sharedLakes ...string) sidecartest.Row {
	e.t.Helper()
	if sharedLakes == nil {
		sharedLakes = []string{}
	}
	var rid uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.create_fork($1, $2, '{}', $3)`, parent, id, sharedLakes).Scan(&rid); err != nil {
		e.t.Fatalf("create_fork: %v", err)
	}
	return e.wait(rid)
}

// dropFork drops a fork through dataenv.drop_fork and returns the request row.
func (e *env) dropFork(id string) sidecartest.Row {
	e.t.Helper()
	var rid uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.drop_fork($1)`, id).Scan(&rid); err != nil {
		e.t.Fatalf("drop_fork: %v", err)
	}
	return e.wait(rid)
}

func execErr(t testing.TB, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql, args...)
	if err == nil {
		t.Fatalf("%s: no error", sql)
	}
	return err.Error()
}

func dropSlot(conn *pgx.Conn) { sidecartest.DropSlot(conn) }

// jobResult is the result of a run request.
type jobResult struct {
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Rows      [][]json.RawMessage `json:"rows"`
	Truncated bool                `json:"truncated"`
}

// rowsText renders rows as "a,b;c,d" for comparisons.
func (r jobResult) rowsText() string {
	var rows []string
	for _, row := range r.Rows {
		var cells []string
		for _, c := range row {
			cells = append(cells, strings.Trim(string(c), `"`))
		}
		rows = append(rows, strings.Join(cells, ","))
	}
	return strings.Join(rows, ";")
}

// request waits for the request and returns its row.
func (e *env) wait(id uuid.UUID) sidecartest.Row {
	e.t.Helper()
	return sidecartest.Wait(e.t, e.conn, id, 120*time.Second)
}

// run runs sql in workspace and returns the result; the request must succeed.
func (e *env) run(workspace, sql string) jobResult {
	e.t.Helper()
	row := e.runRow(workspace, sql)
	if row.Status != "succeeded" {
		e.t.Fatalf("run in %s: %s: %v\nSQL: %s", workspace, row.Status, deref(row.Error), sql)
	}
	var r jobResult
	if err := json.Unmarshal(row.Result, &r); err != nil {
		e.t.Fatalf("result %s: %v", row.Result, err)
	}
	return r
}

func (e *env) runRow(workspace, sql string) sidecartest.Row {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.run($1, $2)`, workspace, sql).Scan(&id); err != nil {
		e.t.Fatalf("dataenv.run: %v", err)
	}
	return e.wait(id)
}

// materialize writes query to target in workspace; the request must succeed.
func (e *env) materialize(workspace, target, query, strategy string) map[string]any {
	e.t.Helper()
	row := e.materializeRow(workspace, target, query, strategy)
	if row.Status != "succeeded" {
		e.t.Fatalf("materialize %s in %s: %s: %v", target, workspace, row.Status, deref(row.Error))
	}
	var out map[string]any
	_ = json.Unmarshal(row.Result, &out)
	return out
}

func (e *env) materializeRow(workspace, target, query, strategy string) sidecartest.Row {
	e.t.Helper()
	var id uuid.UUID
	err := e.conn.QueryRow(context.Background(), `SELECT dataenv.materialize($1, $2, $3, $4)`,
		workspace, target, query, strategy).Scan(&id)
	if err != nil {
		e.t.Fatalf("dataenv.materialize: %v", err)
	}
	return e.wait(id)
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func lakePrefix(t testing.TB) string {
	return strings.ToLower(strings.TrimRight(pg.NamePrefix(t), "_"))
}

func minioListOpts(prefix string) minio.ListObjectsOptions {
	return minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
}

// SQL helpers of the test harness, by this package's names.
var (
	mustExec    = testenv.MustExec
	queryString = testenv.Query[string]
)
