package lakes_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

// stranger is a dataenv user that is no member of the env's workspaces.
func (e *env) stranger() *pgx.Conn {
	e.t.Helper()
	name, pw := pg.CreateRole(e.t, "LOGIN IN ROLE dataenv_user")
	return pg.ConnectAs(e.t, name, pw, e.conn.Config().Database)
}

// bypass inserts a request as the superuser with the insert trigger off for the session, in the
// name of requestedBy: the sidecar alone must refuse it.
func (e *env) bypass(kind string, args map[string]any, requestedBy string) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	err := pgx.BeginFunc(context.Background(), e.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		return tx.QueryRow(context.Background(), `INSERT INTO dataenv.requests (kind, args, requested_by) VALUES ($1, $2, $3) RETURNING id`,
			kind, args, requestedBy).Scan(&id)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestNonMemberCannotMaterializeOrRunInAnotherWorkspace: validate_materialize was SECURITY
// DEFINER, so its membership check saw the definer, and the sidecar did not check requested_by:
// a non-member overwrote another workspace's lake table and read its data through error(...).
// Now both are refused when asked and when a row reaches the sidecar, and the table is intact.
func TestNonMemberCannotMaterializeOrRunInAnotherWorkspace(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/t", attachMain+"SELECT range AS id FROM range(3)", "replace")
	before := e.catalogState("public")
	s := e.stranger()
	who := queryString(t, s, `SELECT current_user::text`)
	for _, sql := range []string{
		`SELECT dataenv.materialize('prod', 'ducklake://main/t', 'SELECT 666 AS id')`,
		`SELECT dataenv.run('prod', 'ATTACH ''ducklake://main'' AS dl; SELECT error((SELECT string_agg(id::text, '','') FROM dl.t))')`,
	} {
		if got := execErr(t, s, sql); !strings.Contains(got, "may not use workspace") {
			t.Errorf("stranger: %s: %s", sql, got)
		}
	}
	for kind, args := range map[string]map[string]any{
		"materialize": {"workspace": "prod", "target": "ducklake://main/t", "query": "SELECT 666 AS id", "strategy": "replace"},
		"run":         {"workspace": "prod", "sql": attachMain + "SELECT error((SELECT string_agg(id::text, ',') FROM dl.t))"},
	} {
		row := e.wait(e.bypass(kind, args, who))
		if row.Status != "failed" || !strings.Contains(deref(row.Error), kind+": permission denied: ") || strings.Contains(deref(row.Error), "0,1,2") {
			t.Errorf("sidecar ran %s for a non-member: %s %s", kind, row.Status, deref(row.Error))
		}
	}
	if got := e.count("prod", "t"); got != "3" {
		t.Fatalf("prod's table after the attempts: %s rows, want 3", got)
	}
	if after := e.catalogState("public"); after != before {
		t.Fatalf("prod's catalog changed: %s -> %s", before, after)
	}
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.materializations WHERE workspace = 'prod'`); n != "1" {
		t.Fatalf("%s materialization records, want 1", n)
	}
}

// TestRecreatedForkIDNeverWritesIntoTheParent: a fork whose lake cleanup failed kept its lake
// rows stamped isolated; a root re-created under its id then resolved those rows as a root's and
// wrote into the parent's lake. Now the id stays taken (by the dropped fork's leftovers) until the
// cleanup succeeds, and nothing reaches the parent's catalog.
func TestRecreatedForkIDNeverWritesIntoTheParent(t *testing.T) {
	e, _ := lakeEnv(t, storageKinds[0])
	e.materialize("prod", "ducklake://main/t", attachMain+"SELECT 1 AS x", "replace")
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/t", attachMain+"SELECT 2 AS x", "replace")
	schema := names.ForkLakeSchema("dev", "main")
	catalog := pg.Connect(t, e.catalog)
	mustExec(t, catalog, `COMMENT ON SCHEMA `+schema+` IS 'not dataenv''s'`)
	if row := e.dropFork("dev"); row.Status != "failed" || !strings.Contains(deref(row.Error), "lacks dataenv's marker") {
		t.Fatalf("drop_fork with an unmarked schema: %s %s", row.Status, deref(row.Error))
	}
	parent := e.catalogState("public")
	s := e.stranger()
	for _, sql := range []string{`SELECT dataenv.create_workspace('dev')`, `INSERT INTO dataenv.workspaces (id) VALUES ('dev')`} {
		if got := execErr(t, s, sql); !strings.Contains(got, "cleanup is not finished") {
			t.Errorf("stranger: %s: %s", sql, got)
		}
	}
	if got := execErr(t, e.conn, `SELECT dataenv.create_workspace('dev')`); !strings.Contains(got, "fork lake namespace") {
		t.Errorf("an administrator re-creating the id is told what is left: %s", got)
	}
	if e.catalogState("public") != parent || e.count("prod", "t") != "1" {
		t.Fatal("the parent's lake changed")
	}
	// Cleaned up, the id is free and a new root starts without lakes.
	mustExec(t, catalog, `COMMENT ON SCHEMA `+schema+` IS '`+names.Marker+`; lake fork namespace'`)
	if row := e.dropFork("dev"); row.Status != "succeeded" {
		t.Fatalf("drop_fork retried: %s %s", row.Status, deref(row.Error))
	}
	mustExec(t, s, `SELECT dataenv.create_workspace('dev')`)
	if n := queryString(t, e.conn, `SELECT count(*)::text FROM dataenv.lakes WHERE workspace = 'dev'`); n != "0" {
		t.Fatalf("the new root has %s lake rows of the dropped fork", n)
	}
}
