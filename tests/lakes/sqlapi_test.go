package lakes_test

import (
	"strings"
	"testing"
)

// The SQL API validates at call time with clear errors and keeps credentials private.
func TestStorageAndLakeAPI(t *testing.T) {
	e := newEnv(t)
	e.workspace("prod", "")
	dir := t.TempDir()
	mustExec(t, e.conn, `SELECT dataenv.add_storage('local', $1)`, "file://"+dir)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('s3', 's3://bucket/root', '{"endpoint":"http://127.0.0.1:9000","region":"us-east-1","access_key_id":"AK","secret_access_key":"SUPERSECRET"}')`)
	for sql, want := range map[string]string{
		`SELECT dataenv.add_storage('bad', 'http://x')`:                                                                     "is not file:///absolute/dir or s3://bucket",
		`SELECT dataenv.add_storage('bad', 'file:///a/../b')`:                                                               "without . or .. segments",
		`SELECT dataenv.add_storage('Bad', 'file:///tmp')`:                                                                  "storage name",
		`SELECT dataenv.add_storage('s4', 's3://bkt', '{"secret_access_key":"x"}')`:                                         "both access_key_id and secret_access_key",
		`SELECT dataenv.add_storage('s4', 's3://bkt', '{"password":"x"}')`:                                                  "unknown credentials key",
		`SELECT dataenv.add_storage('s4', 's3://bkt', '{"read_only_access_key_id":"r"}')`:                                   "both read_only_access_key_id and read_only_secret_access_key",
		`SELECT dataenv.add_storage('s4', 's3://bkt', '{"read_only_access_key_id":"r","read_only_secret_access_key":"s"}')`: "read-only keys need the read-write keys too",
		`SELECT dataenv.add_storage('local', 'file:///tmp')`:                                                                "already exists",
		`SELECT dataenv.add_lake('nope', 'main', 'instance', 'db', 'local', 'lake')`:                                        "no workspace named",
		`SELECT dataenv.add_lake('prod', 'main', 'nocluster', 'db', 'local', 'lake')`:                                       "no cluster named",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'nostorage', 'lake')`:                                    "no storage named",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'local', '../x')`:                                        "data_path",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'local', '__dataenv_forks/x')`:                           "reserved for fork data",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'local', 'l', '{"DATA_PATH":"x"}')`:                      "must not set DATA_PATH",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'local', 'l', '{"bad key":1}')`:                          "not an ATTACH option name",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'local', 'l', '{"ENCRYPTED":[1]}')`:                      "must be a string, a number or a boolean",
		`SELECT dataenv.add_lake('prod', 'main', 'instance', 'db', 'local', 'l', '{"METADATA_SCHEMA":"dataenv_fork_x"}')`:   "METADATA_SCHEMA must be a schema name",
		`SELECT dataenv.run('nope', 'SELECT 1')`:                                                                            "no workspace named",
		`SELECT dataenv.run('prod', '  ; ')`:                                                                                "sql is required",
		`SELECT dataenv.materialize('prod', 'ducklake://main', 'SELECT 1')`:                                                 "is not ducklake://<lake>/<table>",
		`SELECT dataenv.materialize('prod', 'ducklake://nolake/t', 'SELECT 1')`:                                             "has no lake named",
	} {
		if got := execErr(t, e.conn, sql); !strings.Contains(got, want) {
			t.Errorf("%s:\n  got  %s\n  want %s", sql, got, want)
		}
	}
	mustExec(t, e.conn, `SELECT dataenv.add_lake('prod', 'main', 'instance', $1, 'local', '/lake/main/', '{"ENCRYPTED": false}')`, e.catalog)
	if got := queryString(t, e.conn, `SELECT data_url FROM dataenv.lake_info WHERE workspace = 'prod'`); got != "file://"+dir+"/lake/main" {
		t.Errorf("data_url %s", got)
	}
	if got := execErr(t, e.conn, `SELECT dataenv.materialize('prod', 'ducklake://main/t', 'SELECT 1', 'merge')`); !strings.Contains(got, "strategy must be replace or append") {
		t.Error(got)
	}
	// Credentials are readable by the owner only: no view or grant shows them to users.
	user, pw := pg.CreateRole(t, "LOGIN")
	mustExec(t, e.conn, `GRANT dataenv_user TO `+user)
	uc := pg.ConnectAs(t, user, pw, e.conn.Config().Database)
	if got := execErr(t, uc, `SELECT * FROM dataenv.storage_secrets`); !strings.Contains(got, "permission denied") {
		t.Errorf("user reads storage_secrets: %s", got)
	}
	if got := queryString(t, uc, `SELECT string_agg(row_to_json(s)::text, ' ') FROM dataenv.storage_info s`); strings.Contains(got, "SUPERSECRET") {
		t.Errorf("storage_info shows the secret: %s", got)
	}
	if got := execErr(t, uc, `SELECT dataenv.add_storage('x', 'file:///tmp/x')`); !strings.Contains(got, "is not a dataenv administrator") {
		t.Errorf("user adds a storage: %s", got)
	}
}

// Users see lakes and materializations only of the workspaces they may use.
func TestLakeViewsFollowWorkspaceMembership(t *testing.T) {
	e := newEnv(t)
	mustExec(t, e.conn, `SELECT dataenv.add_storage('local', $1)`, "file://"+t.TempDir())
	e.workspace("mine", "")
	e.workspace("theirs", "")
	for _, ws := range []string{"mine", "theirs"} {
		// One catalog schema per lake.
		mustExec(t, e.conn, `SELECT dataenv.add_lake($1, 'main', 'instance', $2, 'local', 'l', jsonb_build_object('METADATA_SCHEMA', $1::text))`, ws, e.catalog)
		mustExec(t, e.conn, `INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, request_id)
			VALUES ($1, 'main', 't', 'materialized', 'replace', gen_random_uuid())`, ws)
	}
	user, pw := pg.CreateRole(t, "LOGIN")
	mustExec(t, e.conn, `GRANT dataenv_user TO `+user)
	mustExec(t, e.conn, `SELECT dataenv.grant_workspace('mine', $1)`, user)
	uc := pg.ConnectAs(t, user, pw, e.conn.Config().Database)
	for _, v := range []string{"dataenv.lake_info", "dataenv.materialization_list"} {
		if got := queryString(t, uc, `SELECT string_agg(workspace, ',') FROM `+v); got != "mine" {
			t.Errorf("%s shows %s", v, got)
		}
	}
	if got := execErr(t, uc, `SELECT dataenv.run('theirs', 'SELECT 1')`); !strings.Contains(got, "may not use workspace") {
		t.Errorf("run in another's workspace: %s", got)
	}
}
