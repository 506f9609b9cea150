package forks_test

import (
	"context"
	_ "embed"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

//go:embed testdata/fidelity_parent.sql
var fidelityParentSQL string

// What newer servers add to the fixture: applied on PostgreSQL 17 and newer, and 18 and newer.
var (
	//go:embed testdata/fidelity_parent_17.sql
	fidelityParent17SQL string
	//go:embed testdata/fidelity_parent_18.sql
	fidelityParent18SQL string
)

// fidelityParent is a parent database holding one object of each kind a fork must reproduce
// (testdata/fidelity_parent.sql), created through create_database, with three datatable roles:
// owner2 owns some of its objects, other only has default privileges, reader is only granted
// things.
type fidelityParent struct {
	db                    string
	owner2, other, reader string
}

func (f *fixture) fidelityParent(suffix string) fidelityParent {
	f.t.Helper()
	p := fidelityParent{db: f.prefix + suffix, owner2: f.prefix + suffix + "_owner2", other: f.prefix + suffix + "_other",
		reader: f.prefix + suffix + "_reader"}
	for _, r := range []string{p.owner2, p.other, p.reader} {
		f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_datatable_role($1, $2)`, f.name, r))
	}
	f.mustSucceed(f.request(f.sql, `SELECT dataenv.create_database($1, $2)`, f.name, p.db))
	fill := strings.NewReplacer("{{db}}", ident(p.db), "{{app}}", ident(f.appRole), "{{owner2}}", ident(p.owner2),
		"{{other}}", ident(p.other), "{{reader}}", ident(p.reader))
	conn := external.Connect(f.t, p.db)
	mustExec(f.t, conn, fill.Replace(fidelityParentSQL))
	version := queryInt(f.t, conn, `SELECT current_setting('server_version_num')::int`)
	if version >= 170000 {
		mustExec(f.t, conn, fill.Replace(fidelityParent17SQL))
	}
	if version >= 180000 {
		mustExec(f.t, conn, fill.Replace(fidelityParent18SQL))
	}
	_ = conn.Close(f.ctx)
	return p
}

// forkFidelity is what a create_fork result says about one datatable's copy.
type forkFidelity struct {
	Datatable string `json:"datatable"`
	Mode      string `json:"mode"`
	Method    string `json:"method"`
	Database  string `json:"database"`
	Fidelity  struct {
		Owner        string   `json:"owner"`
		MappedRoles  []string `json:"mapped_roles"`
		MethodReason string   `json:"method_reason"`
		NotCarried   []struct {
			Object string `json:"object"`
			Reason string `json:"reason"`
		} `json:"not_carried"`
		Unpopulated []string `json:"unpopulated_materialized_views"`
		Template    struct {
			Database string `json:"database"`
			Status   string `json:"status"`
			Request  string `json:"request"`
			Spare    string `json:"spare"`
		} `json:"schema_template"`
	} `json:"fidelity"`
}

func (f *fixture) forkResult(r row, datatable string) forkFidelity {
	f.t.Helper()
	var res struct {
		Datatables []forkFidelity `json:"datatables"`
	}
	decode(f.t, r.result, &res)
	for _, d := range res.Datatables {
		if d.Datatable == datatable {
			return d
		}
	}
	f.t.Fatalf("result %s has no datatable %s", r.result, datatable)
	return forkFidelity{}
}

// TestForkFidelity forks the fidelity fixture in every mode by every method and compares the
// fork's catalogs with the parent's (catalog_test.go): schema objects, comments, owners mapped
// to the fork's owner, privileges, default privileges (another role's too), database settings,
// role settings in the database, the database's ACL, sequence positions; rows, materialized
// views and large objects for full_copy. The fork is usable by its owner (it can migrate what
// another role owned in the parent, and pg_dump the whole copy with the password its members
// get), and nobody the parent refused may connect to it.
func TestForkFidelity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.newUser()
	p := f.fidelityParent("fid")
	ws := wsID("fid")
	mustExec(t, a.conn, `SELECT dataenv.create_workspace($1)`, ws)
	f.grantDatabase(a, f.name, p.db)
	mustExec(t, a.conn, `SELECT dataenv.add_datatable($1, 'app', $2, $3)`, ws, f.name, p.db)
	parent := readCatalog(t, p.db)
	stranger, strangerPW := external.CreateRole(t, "LOGIN")

	var forks []string
	check := func(t *testing.T, fork, mode, wantMethod string, exp expectation) forkFidelity {
		forks = append(forks, fork)
		r := f.mustSucceed(f.request(a.conn, `SELECT dataenv.create_fork($1, $2, jsonb_build_object('app', $3::text))`, ws, fork, mode))
		res := f.forkResult(r, "app")
		db := names.ForkDatabase(fork, "app")
		if res.Method != wantMethod {
			t.Errorf("%s fork made by %q, want %q", mode, res.Method, wantMethod)
		}
		owner := f.forkRole(fork)
		if res.Fidelity.Owner != owner {
			t.Errorf("result: owner %q, want the fork's workspace role %q", res.Fidelity.Owner, owner)
		}
		for _, role := range []string{f.appRole, p.owner2, p.other} {
			if !slices.Contains(res.Fidelity.MappedRoles, role) {
				t.Errorf("result: mapped roles %v do not list %s", res.Fidelity.MappedRoles, role)
			}
		}
		exp.owner = owner
		for _, d := range compareFork(parent, readCatalog(t, db), exp) {
			if !reportedExtensionOwner(d, res) {
				t.Error(d)
			}
		}
		// The owner migrates what owner2 owned in the parent; the refused stranger cannot connect.
		conn := external.Connect(t, db)
		mustExec(t, conn, `SET ROLE `+ident(owner)+`; ALTER TABLE app.audit ADD COLUMN note text; ALTER TABLE app.events_2026 SET (fillfactor = 90)`)
		_ = conn.Close(f.ctx)
		pw := queryString(t, a.conn, `SELECT dataenv.connection_password($1)`, fork)
		if err := dumpAs(t, owner, pw, db); err != nil {
			t.Errorf("the fork's owner cannot dump its copy: %v", err)
		}
		if err := tryConnect(stranger, strangerPW, db); err == nil || !strings.Contains(err.Error(), "permission denied for database") {
			t.Errorf("a role the parent refused connects to the fork: %v", err)
		}
		return res
	}

	t.Run("schema_only/dump", func(t *testing.T) {
		res := check(t, wsID("so1"), "schema_only", "dump", expectation{})
		if !slices.Equal(res.Fidelity.Unpopulated, []string{"app.customer_totals"}) {
			t.Errorf("result: unpopulated materialized views %v, want [app.customer_totals]", res.Fidelity.Unpopulated)
		}
		if res.Fidelity.Template.Request == "" {
			t.Fatalf("result: no schema template is being built: %+v", res.Fidelity.Template)
		}
		f.mustSucceed(res.Fidelity.Template.Request)
	})
	t.Run("schema_only/schema_template", func(t *testing.T) {
		res := check(t, wsID("so2"), "schema_only", "schema_template", expectation{})
		if res.Fidelity.Template.Status != "used" || res.Fidelity.Template.Database == "" || res.Fidelity.Template.Spare == "" {
			t.Errorf("result: schema template %+v, want used, by taking its spare", res.Fidelity.Template)
		}
		// A fork that finds no spare copies the template itself: the same catalogs. The next
		// spare is made, then kept out of reach (as if it were still being built).
		f.mustSucceed(res.Fidelity.Template.Request)
		mustExec(t, f.sql, `UPDATE dataenv.schema_templates SET state = 'building' WHERE workspace = $1 AND spare_of IS NOT NULL`, ws)
		res = check(t, wsID("so3"), "schema_only", "schema_template", expectation{})
		if res.Fidelity.Template.Status != "used" || res.Fidelity.Template.Spare != "" {
			t.Errorf("result: schema template %+v, want used, copied (no spare was ready)", res.Fidelity.Template)
		}
	})
	t.Run("full_copy/template", func(t *testing.T) {
		check(t, wsID("fc1"), "full_copy", "template", expectation{withData: true})
	})
	t.Run("full_copy/dump", func(t *testing.T) {
		// A session on the parent: CREATE DATABASE ... TEMPLATE is refused, the copy is a dump.
		held := external.Connect(t, p.db)
		defer held.Close(f.ctx)
		// The cluster's admin may not bypass the forced row-level security of app.notes: its rows
		// are not copied, and the result says so.
		res := check(t, wsID("fc2"), "full_copy", "dump", expectation{withData: true, skipRows: []string{"app.notes"}})
		if len(res.Fidelity.NotCarried) != 1 || !strings.Contains(res.Fidelity.NotCarried[0].Object, "app.notes") ||
			!strings.Contains(res.Fidelity.NotCarried[0].Reason, "row-level security") {
			t.Errorf("result: not carried %+v, want the rows of app.notes (forced row-level security)", res.Fidelity.NotCarried)
		}
	})
	// The schema template counts as a use of the parent and goes with its datatable entry.
	t.Run("drop", func(t *testing.T) {
		for _, fork := range forks {
			f.mustSucceed(f.request(a.conn, `SELECT dataenv.drop_fork($1)`, fork))
		}
		tpl := queryString(t, f.sql, `SELECT database FROM dataenv.schema_templates WHERE workspace = $1 AND spare_of IS NULL`, ws)
		if n := queryInt(t, f.sql, `SELECT count(*) FROM dataenv.managed_database_uses($1, $2) WHERE kind = 'schema template'`, f.name, p.db); n != 1 {
			t.Fatalf("the parent's uses list %d schema templates, want 1 (%s)", n, tpl)
		}
		mustExec(t, a.conn, `SELECT dataenv.remove_datatable($1, 'app')`, ws)
		f.mustSucceed(f.pendingRequest(t, "refresh_schema_template", ws))
		if databaseExists(t, tpl) || queryInt(t, f.sql, `SELECT count(*) FROM dataenv.schema_templates WHERE workspace = $1`, ws) != 0 {
			t.Fatalf("schema template %s is left after its datatable was removed", tpl)
		}
	})
}

// pendingRequest is the id of the newest request of kind whose args name workspace.
func (f *fixture) pendingRequest(t *testing.T, kind, workspace string) string {
	t.Helper()
	id := queryString(t, f.sql, `SELECT id::text FROM dataenv.requests WHERE kind = $1 AND args->>'workspace' = $2
		ORDER BY created_at DESC LIMIT 1`, kind, workspace)
	if id == "" {
		t.Fatalf("no %s request for workspace %s", kind, workspace)
	}
	return id
}

// tryConnect connects to db of the external cluster as user and closes the connection at once.
func tryConnect(user, password, db string) error {
	conn, err := pgx.Connect(context.Background(), external.DSNAs(user, password, db))
	if err != nil {
		return err
	}
	return conn.Close(context.Background())
}

// reportedExtensionOwner: d is an extension keeping its owner in a TEMPLATE copy (PostgreSQL
// changes an extension's owner only by REASSIGN OWNED, which dataenv never runs) that the
// result reports as not carried.
func reportedExtensionOwner(d string, res forkFidelity) bool {
	if !strings.HasPrefix(d, "owner: extension ") {
		return false
	}
	for _, n := range res.Fidelity.NotCarried {
		if strings.HasPrefix(n.Object, "extension ") && strings.Contains(d, n.Object+" is owned by") {
			return true
		}
	}
	return false
}
