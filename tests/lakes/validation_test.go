package lakes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// addLakeCheck calls add_lake (which makes a check_lake request) and returns the check's row.
func (e *env) addLakeCheck(sql string, args ...any) (status, errText string, result string) {
	e.t.Helper()
	var id uuid.UUID
	if err := e.conn.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	row := e.wait(id)
	return row.Status, deref(row.Error), string(row.Result)
}

// add_lake refuses at call time, with what to do, a catalog database that does not exist on the
// instance cluster and a catalog schema that is another lake's; nothing is saved.
func TestAddLakeRefusesAMissingOrTakenCatalog(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.workspace("other", "")
	msg := execErr(t, e.conn, `SELECT dataenv.add_lake('other', 'main', 'instance', 'no_such_db', 'st', 'lakes/other')`)
	hint := hintOf(t, e, `SELECT dataenv.add_lake('other', 'main', 'instance', 'no_such_db', 'st', 'lakes/other')`)
	if !strings.Contains(msg, `database "no_such_db" does not exist on cluster "instance"`) ||
		!strings.Contains(hint, `SELECT dataenv.create_database('instance', 'no_such_db')`) {
		t.Fatalf("a missing catalog database: %s (hint %s)", msg, hint)
	}
	msg = execErr(t, e.conn, `SELECT dataenv.add_lake('other', 'main', 'instance', $1, 'st', 'lakes/other')`, e.catalog)
	if !strings.Contains(msg, `(metadata schema public) is already the catalog of lake "main" of workspace "prod"`) {
		t.Fatalf("another lake's catalog: %s", msg)
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.lakes WHERE workspace = 'other'`); n != "0" {
		t.Fatalf("%s lakes saved by refused calls", n)
	}
	// Another metadata schema in the same database is another lake's own.
	if st, errText, _ := e.addLakeCheck(`SELECT dataenv.add_lake('other', 'main', 'instance', $1, 'st', 'lakes/other', '{"METADATA_SCHEMA": "other_lake"}')`,
		e.catalog); st != "succeeded" {
		t.Fatalf("a lake in another schema: %s %s", st, errText)
	}
}

// The check_lake request add_lake makes says what the first job would find: a catalog of the
// lake's own is fine, one that holds another data path (a lake removed and added again
// elsewhere), a database missing on an external cluster and an S3 bucket that does not answer are
// each a failure naming the fix.
func TestCheckLakeSaysWhatToFix(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	if st, errText, res := e.addLakeCheck(`SELECT dataenv.check_lake('prod', 'main')`); st != "succeeded" || !strings.Contains(res, `"catalog_state": "new"`) {
		t.Fatalf("a fresh lake: %s %s %s", st, errText, res)
	}
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	if st, errText, res := e.addLakeCheck(`SELECT dataenv.check_lake('prod', 'main')`); st != "succeeded" || !strings.Contains(res, `"catalog_state": "this lake's"`) {
		t.Fatalf("a lake after its first job: %s %s %s", st, errText, res)
	}

	mustExec(t, e.conn, `SELECT dataenv.remove_lake('prod', 'main')`)
	st, errText, _ := e.addLakeCheck(`SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'st', 'lakes/moved')`, e.catalog)
	if st != "failed" || !strings.Contains(errText, "already holds a DuckLake lake whose data path is") || !strings.Contains(errText, "lakes/main/") ||
		!strings.Contains(errText, "SELECT dataenv.remove_lake('prod', 'main')") {
		t.Fatalf("a catalog with another data path: %s %s", st, errText)
	}

	name := lakePrefix(t) + "ext"
	mustExec(t, e.conn, `SELECT dataenv.register_cluster($1, $2, $3, $4, $5, 'disable', validate => false)`,
		name, pg.Host(), pg.Port(), pg.SuperUser, pg.SuperPassword)
	e.workspace("third", "")
	st, errText, _ = e.addLakeCheck(`SELECT dataenv.add_lake('third', 'main', $1, 'no_such_db', 'st', 'lakes/third')`, name)
	if st != "failed" || !strings.Contains(errText, `the catalog database "no_such_db" does not exist on cluster "`+name+`"`) ||
		!strings.Contains(errText, fmt.Sprintf("SELECT dataenv.create_database('%s', 'no_such_db')", name)) {
		t.Fatalf("a missing database on an external cluster: %s %s", st, errText)
	}

	mustExec(t, e.conn, `SELECT dataenv.add_storage('nobucket', 's3://no-such-bucket-dataenv', $1::jsonb)`,
		fmt.Sprintf(`{"endpoint": "http://%s", "region": %q, "access_key_id": %q, "secret_access_key": %q}`, s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey))
	e.workspace("fourth", "")
	catalog := pg.CreateDatabase(t)
	st, errText, _ = e.addLakeCheck(`SELECT dataenv.add_lake('fourth', 'main', 'instance', $1, 'nobucket', 'lakes/fourth')`, catalog)
	if st != "failed" || !strings.Contains(errText, `storage "nobucket" (s3://no-such-bucket-dataenv) does not answer`) ||
		strings.Contains(errText, s3.SecretKey) {
		t.Fatalf("a bucket that does not exist: %s %s", st, errText)
	}
}

// A storage url can be fixed until a lake has data under it; a storage is removed once nothing
// uses it; a non-administrator is told which role these need.
func TestUpdateAndRemoveStorage(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	mustExec(t, e.conn, `SELECT dataenv.add_storage('typo', 'file:///srv/lkaes')`)
	e.workspace("other", "")
	catalog := pg.CreateDatabase(t)
	mustExec(t, e.conn, `SELECT dataenv.add_lake('other', 'main', 'instance', $1, 'typo', 'lake', validate => false)`, catalog)
	mustExec(t, e.conn, `SELECT dataenv.update_storage('typo', 'file:///srv/lakes/')`)
	if got := queryString(t, e.conn, `SELECT url FROM dataenv.storage_info WHERE name = 'typo'`); got != "file:///srv/lakes" {
		t.Fatalf("url after update_storage: %s", got)
	}
	if msg := execErr(t, e.conn, `SELECT dataenv.update_storage('typo', 'http://x')`); !strings.Contains(msg, "is not file:///absolute/dir or s3://bucket") {
		t.Fatalf("a bad url: %s", msg)
	}
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	if msg := execErr(t, e.conn, `SELECT dataenv.update_storage('st', 'file:///elsewhere')`); !strings.Contains(msg, `lakes on storage "st" have data under its url already: prod/main`) {
		t.Fatalf("update_storage with data: %s", msg)
	}

	if msg := execErr(t, e.conn, `SELECT dataenv.remove_storage('typo')`); !strings.Contains(msg, `storage "typo" is still in use by: lake main of workspace other`) {
		t.Fatalf("remove_storage in use: %s", msg)
	}
	mustExec(t, e.conn, `SELECT dataenv.remove_lake('other', 'main')`)
	mustExec(t, e.conn, `SELECT dataenv.remove_storage('typo')`)
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.storage_info WHERE name = 'typo'`); n != "0" {
		t.Fatal("the storage is still there")
	}

	user, pw := pg.CreateRole(t, "LOGIN")
	mustExec(t, e.conn, `GRANT dataenv_user TO `+user)
	uc := pg.ConnectAs(t, user, pw, e.conn.Config().Database)
	for _, sql := range []string{
		`SELECT dataenv.add_storage('x', 'file:///tmp/x')`,
		`SELECT dataenv.update_storage('st', 'file:///tmp/x')`,
		`SELECT dataenv.remove_storage('st')`,
		`SELECT dataenv.add_lake('prod', 'x', 'instance', 'db', 'st', 'x')`,
		`SELECT dataenv.remove_lake('prod', 'main')`,
		`SELECT dataenv.register_cluster('c', 'h', 5432, 'u', 'p')`,
		`SELECT dataenv.remove_cluster('c')`,
		`SELECT dataenv.setup_cluster('instance')`,
		`SELECT dataenv.check_lake('prod', 'main')`,
	} {
		if msg := execErr(t, uc, sql); !strings.Contains(msg, "dataenv_admin") || strings.Contains(msg, "permission denied for function") {
			t.Errorf("%s as a dataenv_user: %s", sql, msg)
		}
	}
}
