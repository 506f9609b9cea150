package security_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// victim is a workspace of the owner with what an attacker wants: a datatable (its database
// granted to the owner), a lake (bound by an administrator), a fork with a copy of the datatable
// and a materialization record; the member may use both, the stranger neither. A datatable role
// exists on the external cluster.
type victim struct {
	ws, fork, parentDB, catalog, role string
}

func (e *env) victim() victim {
	e.t.Helper()
	v := victim{ws: wsID("victim"), parentDB: e.parentDB("victimdb"), catalog: control.CreateDatabase(e.t), role: e.prefix + "reader"}
	v.fork = v.ws + "/f"
	mustExec(e.t, e.owner.conn, `SELECT dataenv.create_workspace($1)`, v.ws)
	e.exec(`SELECT dataenv.grant_database($1, $2, $3)`, e.cluster, v.parentDB, e.owner.name)
	mustExec(e.t, e.owner.conn, `SELECT dataenv.add_datatable($1, 'd', $2, $3)`, v.ws, e.cluster, v.parentDB)
	e.exec(`SELECT dataenv.add_storage('st', $1)`, "file://"+e.t.TempDir())
	e.exec(`SELECT dataenv.add_lake($1, 'main', 'instance', $2, 'st', 'lakes/main')`, v.ws, v.catalog)
	e.exec(`INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, request_id)
		VALUES ($1, 'main', 't', 'materialized', 'replace', gen_random_uuid())`, v.ws)
	e.mustSucceed(e.request(e.owner.conn, `SELECT dataenv.create_fork($1, $2, '{"d": "schema_only"}')`, v.ws, v.fork))
	// The fork asked for its datatable's schema template: built now, before any state is compared.
	e.mustSucceed(uuid.MustParse(queryString(e.t, e.sql, `SELECT id::text FROM dataenv.requests
		WHERE kind = 'refresh_schema_template' AND args->>'workspace' = $1`, v.ws)))
	for _, ws := range []string{v.ws, v.fork} {
		mustExec(e.t, e.owner.conn, `SELECT dataenv.grant_workspace($1, $2)`, ws, e.member.name)
	}
	e.mustSucceed(e.request(e.sql, `SELECT dataenv.create_datatable_role($1, $2)`, e.cluster, v.role))
	return v
}

// state is everything a request could change: the control database's records, the databases and
// roles of the external cluster, the schemas of the lake's catalog.
func (e *env) state(v victim) string {
	e.t.Helper()
	var parts []string
	for _, q := range []string{
		`SELECT id, is_fork, parent, created_by FROM dataenv.workspaces`,
		`SELECT workspace, member FROM dataenv.workspace_members`,
		`SELECT workspace, name, cluster, database, source FROM dataenv.datatables`,
		`SELECT workspace, name, catalog_cluster, catalog_database, fork_behavior FROM dataenv.lakes`,
		`SELECT workspace, lake, table_name, status FROM dataenv.materializations`,
		`SELECT cluster, database, workspace, state FROM dataenv.fork_copies`,
		`SELECT cluster, name, database_oid FROM dataenv.managed_databases`,
		`SELECT cluster, role, role_oid FROM dataenv.datatable_roles`,
		`SELECT name, set_up_for, set_up_at FROM dataenv.clusters`,
		`SELECT workspace, lake, metadata_schema FROM dataenv.fork_lake_namespaces`,
		`SELECT cluster, database, grantee FROM dataenv.database_grants`,
		`SELECT id, owner FROM dataenv.workspace_tombstones`,
		`SELECT fork, lake, ancestor, snapshot_id FROM dataenv.fork_lake_pins`,
	} {
		parts = append(parts, queryString(e.t, e.sql, `SELECT coalesce(string_agg(x::text, ';' ORDER BY x::text), '') FROM (`+q+`) x`))
	}
	ext := external.Connect(e.t, "postgres")
	defer ext.Close(context.Background())
	// This test's objects only: other tests share the external cluster.
	mangled := strings.ReplaceAll(v.ws, "-", "_")
	parts = append(parts,
		queryString(e.t, ext, `SELECT string_agg(datname || ':' || oid, ',' ORDER BY datname) FROM pg_database
			WHERE datname LIKE $1 || '%' OR (datname LIKE 'dataenv%' AND strpos(datname, $2) > 0)`, e.prefix, mangled),
		queryString(e.t, ext, `SELECT string_agg(rolname || ':' || oid, ',' ORDER BY rolname) FROM pg_roles
			WHERE rolname LIKE $1 || '%' OR rolname = $2 OR rolname = replace($2, '_app', '_repl')`, e.prefix, e.appRole))
	cat := control.Connect(e.t, v.catalog)
	defer cat.Close(context.Background())
	parts = append(parts, queryString(e.t, cat, `SELECT string_agg(nspname, ',' ORDER BY nspname) FROM pg_namespace`))
	return strings.Join(parts, "\n")
}

// kindCase is how TestEveryKindRefusesWithoutTheRight makes a request of one kind: the policy
// the kind must declare and args that would do harm if the request ran.
type kindCase struct {
	policy string
	args   func(v victim, e *env) string
}

var kindCases = map[string]kindCase{
	"ping": {"any", func(victim, *env) string { return `{}` }},
	"setup_cluster": {"admin", func(_ victim, e *env) string {
		return fmt.Sprintf(`{"cluster": %q}`, e.cluster)
	}},
	"create_database": {"admin", func(_ victim, e *env) string {
		return fmt.Sprintf(`{"cluster": %q, "name": %q}`, e.cluster, e.prefix+"evil")
	}},
	"drop_database": {"admin", func(v victim, e *env) string {
		return fmt.Sprintf(`{"cluster": %q, "name": %q, "terminate_sessions": true}`, e.cluster, v.parentDB)
	}},
	"create_datatable_role": {"admin", func(_ victim, e *env) string {
		return fmt.Sprintf(`{"cluster": %q, "role": %q}`, e.cluster, e.prefix+"evil")
	}},
	"drop_datatable_role": {"admin", func(v victim, e *env) string {
		return fmt.Sprintf(`{"cluster": %q, "role": %q}`, e.cluster, v.role)
	}},
	"check_cluster": {"admin", func(_ victim, e *env) string {
		return fmt.Sprintf(`{"cluster": %q}`, e.cluster)
	}},
	"check_lake": {"admin", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q, "lake": "main"}`, v.ws)
	}},
	"create_fork": {"workspace_member", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"parent": %q, "fork": %q, "datatables": {"d": "full_copy"}, "shared_lakes": ["main"]}`, v.ws, v.ws+"/evil")
	}},
	"drop_fork": {"workspace_owner", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"fork": %q, "cascade": true}`, v.fork)
	}},
	// A comparison shows the fork's copies and the parent's current schema and lake records.
	"compare_fork": {"workspace_member", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"fork": %q}`, v.fork)
	}},
	// A repin moves what every member of the fork reads.
	"repin_fork": {"workspace_member", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"fork": %q}`, v.fork)
	}},
	// Maintenance expires the snapshots every reader of the lake could time travel to.
	"maintain_lake": {"workspace_owner", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q, "lake": "main"}`, v.ws)
	}},
	// A reset replaces the fork's copies (ending their sessions) and drops its lake tables.
	"reset_fork": {"workspace_owner", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"fork": %q}`, v.fork)
	}},
	"run": {"workspace_member", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q, "sql": "ATTACH 'datatable://d' AS d; SELECT * FROM d.public.secrets_of_the_owner"}`, v.ws)
	}},
	"prepare_connection": {"workspace_member", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q}`, v.ws)
	}},
	"rotate_credentials": {"workspace_owner", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q}`, v.fork)
	}},
	// A build is refused by the handler to anyone but a member; policy any lets the remover of a
	// datatable entry clean up its templates (the trigger of sqlapi/028_schema_templates.sql).
	"refresh_schema_template": {"any", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q, "datatable": "d"}`, v.ws)
	}},
	// Promote rewrites the parent's table: its owner's, whoever may use the fork.
	"promote": {"workspace_owner", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"fork": %q, "parent": %q, "target": "ducklake://main/t", "force": true}`, v.fork, v.ws)
	}},
	// An envelope runs a request in the satellite it names: only that satellite's login role
	// may file one (not even an administrator), whatever origin args claim.
	"satellite": {"satellite", func(v victim, e *env) string {
		return `{"database_oid": "1", "installation_id": "00000000-0000-4000-8000-000000000001",
			"request_id": "00000000-0000-4000-8000-000000000002", "xact": "1", "protocol": 1}`
	}},
	"materialize": {"workspace_member", func(v victim, _ *env) string {
		return fmt.Sprintf(`{"workspace": %q, "target": "ducklake://main/t", "query": "SELECT 666 AS overwritten", "strategy": "replace"}`, v.ws)
	}},
}

// refusedBy lists the actors a policy refuses.
func (e *env) refusedBy(policy string) []user {
	switch policy {
	case "any":
		return []user{e.outsider}
	case "workspace_member":
		return []user{e.outsider, e.stranger}
	case "workspace_owner":
		return []user{e.outsider, e.stranger, e.member}
	case "satellite":
		return []user{e.outsider, e.stranger, e.member, e.owner, e.admin}
	default: // admin
		return []user{e.outsider, e.stranger, e.member, e.owner}
	}
}

// TestEveryKindRefusesWithoutTheRight runs every registered request kind as each actor its policy
// refuses (a login that is no dataenv user, a non-member, a member that is not the owner, a
// non-admin): refused at insert time (by the SQL function's own INSERT and by a row an
// administrator inserts in the actor's name), and refused by the sidecar for a row that reached
// the table without the insert trigger, with nothing changed anywhere. A new kind without a case
// here fails the test: every kind declares a policy and is proven to hold it.
func TestEveryKindRefusesWithoutTheRight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.victim()
	rows, err := e.sql.Query(e.ctx, `SELECT kind, policy, coalesce(workspace_arg, '') FROM dataenv.request_kinds ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	type kind struct{ name, policy, arg string }
	var kinds []kind
	for rows.Next() {
		var k kind
		if err := rows.Scan(&k.name, &k.policy, &k.arg); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	before := e.state(v)
	var sidecarChecks []struct {
		id      uuid.UUID
		kind    string
		as      string
		wantErr string
	}
	for _, k := range kinds {
		c, ok := kindCases[k.name]
		if !ok {
			t.Errorf("request kind %q has no case in kindCases: add its policy and harmful args", k.name)
			continue
		}
		if k.policy != c.policy {
			t.Errorf("request kind %q declares policy %q, want %q", k.name, k.policy, c.policy)
		}
		args := c.args(v, e)
		for _, u := range e.refusedBy(c.policy) {
			wantDenied(t, k.name+" as "+u.name, u.conn,
				`INSERT INTO dataenv.requests (kind, args) VALUES ($1, $2::jsonb)`, k.name, args)
			wantDenied(t, k.name+" by an admin for "+u.name, e.admin.conn,
				`INSERT INTO dataenv.requests (kind, args, requested_by) VALUES ($1, $2::jsonb, $3)`, k.name, args, u.name)
			// dataenv.authorize_request's refusal, as the sidecar reports it
			want := k.name + ": permission denied: "
			sidecarChecks = append(sidecarChecks, struct {
				id      uuid.UUID
				kind    string
				as      string
				wantErr string
			}{e.bypass(k.name, args, u.name), k.name, u.name, want})
		}
	}
	for _, s := range sidecarChecks {
		r := e.wait(s.id)
		if r.status != "failed" || !strings.HasPrefix(r.err, s.wantErr) {
			t.Errorf("sidecar ran %s for %s: %s %q (steps %s), want failed by the authorization with %q", s.kind, s.as, r.status, r.err, r.steps, s.wantErr)
		}
	}
	if after := e.state(v); after != before {
		t.Fatalf("refused requests changed something:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The actors the policies allow still may (the fixture made the victim's fork as its owner,
	// and the administrator made the role): a refusal is about the actor, not the request.
	e.mustSucceed(e.request(e.member.conn, `SELECT dataenv.ping()`))
	e.mustSucceed(e.request(e.owner.conn, `SELECT dataenv.drop_fork($1)`, v.fork))
	if databaseExists(t, e.prefix+"evil") {
		t.Fatal("a refused create_database created its database")
	}
}
