package lake

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
	"github.com/jackc/pgx/v5"
)

// ancestorNode is one physical namespace up a fork chain, attached READ_ONLY under Alias. Two
// ancestors share a node when they share a namespace (a shared fork and its parent).
type ancestorNode struct {
	Alias      string
	NS         Namespace
	Workspaces []string
	// Pin is the snapshot a pinned fork reads the namespace at (pins.go); AtPin its tables then.
	Pin   *int64
	AtPin map[string]bool
}

// materialization is the latest recorded state of a lake table in one workspace.
type materialization struct {
	Workspace, Table, Status string
	SnapshotID               *int64
	Columns                  []struct {
		Name string `json:"name"`
	}
}

func (m materialization) scd2() bool {
	for _, c := range m.Columns {
		if c.Name == "is_current" {
			return true
		}
	}
	return false
}

const materializationsSQL = `
SELECT DISTINCT ON (workspace, table_name) workspace, table_name, status, snapshot_id, columns
  FROM dataenv.materializations
 WHERE lake = $1 AND workspace = ANY($2)
 ORDER BY workspace, table_name, id DESC`

func readMaterializations(ctx context.Context, q control.Querier, lake string, workspaces []string) (map[string]map[string]materialization, error) {
	rows, err := q.Query(ctx, materializationsSQL, lake, workspaces)
	if err != nil {
		return nil, fmt.Errorf("read materializations: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (materialization, error) {
		var m materialization
		var cols []byte
		err := r.Scan(&m.Workspace, &m.Table, &m.Status, &m.SnapshotID, &cols)
		if err == nil {
			err = json.Unmarshal(cols, &m.Columns)
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read materializations: %w", err)
	}
	out := map[string]map[string]materialization{}
	for _, m := range list {
		if out[m.Workspace] == nil {
			out[m.Workspace] = map[string]materialization{}
		}
		out[m.Workspace][m.Table] = m
	}
	return out, nil
}

// ancestorNodes lists the namespaces of lake up the chain, nearest first, skipping ancestors
// without the lake, ancestors whose namespace was never bootstrapped (checked in that ancestor's
// own catalog database) and ones that cannot be read for a lasting reason (which disables only
// their defer). A passing failure (a lost connection, a server restarting, a sidecar that lost
// its leadership while fencing) fails the attempt, which is retried: skipping the ancestor then
// would run the job without the attach its fork's defer views read. The workspace's role is
// given read access to each namespace listed.
func (res *resolution) ancestorNodes(ctx context.Context, lake string) ([]*ancestorNode, error) {
	var nodes []*ancestorNode
	byKey := map[string]*ancestorNode{}
	for _, a := range res.ws.Ancestors {
		l, ok := res.lakes[a.ID][lake]
		if !ok {
			continue
		}
		s, err := res.storage(ctx, l.Storage)
		if err != nil {
			if passing(ctx, err) {
				return nil, fmt.Errorf("ancestor %s: storage %q: %w", a.ID, l.Storage, err)
			}
			res.note("ancestor %s: %v; its tables are not deferred", a.ID, err)
			continue
		}
		ns := namespaceOf(a.ID, a.IsFork, l, s)
		if n, ok := byKey[ns.Key()]; ok {
			n.Workspaces = append(n.Workspaces, a.ID)
			continue
		}
		exists, err := res.namespaceExists(ctx, ns)
		if err == nil {
			err = request.Retryable(crashpoint.FailOnce(CrashAncestorCatalog)) // tests: a passing fault
		}
		if err != nil {
			if passing(ctx, err) {
				return nil, fmt.Errorf("ancestor %s: read its lake catalog: %w", a.ID, err)
			}
			res.note("ancestor %s: catalog unreachable (%v); its tables are not deferred", a.ID, err)
			continue
		}
		if !exists {
			continue
		}
		if _, err := res.r.Access.Grant(ctx, ns, res.ws.ID, AccessRead, res.rep); err != nil {
			return nil, err
		}
		n := &ancestorNode{Alias: names.AncestorAlias(lake, a.ID), NS: ns, Workspaces: []string{a.ID}}
		byKey[ns.Key()] = n
		nodes = append(nodes, n)
	}
	// Tables an ancestor's members wrote from their own DuckDB sessions are deferred to as well:
	// recorded first (as the namespace's farthest workspace, whose namespace it is).
	for _, n := range nodes {
		if _, err := res.recordOutsideTables(ctx, n.NS, res.ws.ID, n.Workspaces[len(n.Workspaces)-1], n.Workspaces); err != nil {
			if passing(ctx, err) {
				return nil, fmt.Errorf("ancestor %s: record the tables written outside dataenv: %w", n.Workspaces[0], err)
			}
			res.note("ancestor %s: tables written outside dataenv not checked: %v", n.Workspaces[0], err)
		}
	}
	return nodes, nil
}

// CrashAncestorCatalog makes the first read of an ancestor's lake catalog fail with a passing
// error (crashpoint.FailOnce, wrapped retryable), as a lost connection would.
const CrashAncestorCatalog = "lake.ancestor_catalog.fail_once"

// passing reports whether err is a failure that a later attempt may not meet.
func passing(ctx context.Context, err error) bool {
	return ctx.Err() != nil || request.IsTransient(err)
}

func (res *resolution) note(format string, args ...any) {
	res.plan.Notes = append(res.plan.Notes, fmt.Sprintf(format, args...))
}

// namespaceExistsSQL: DuckLake's tables exist in the schema. A catalog query only: on an admin
// connection it reads nothing a workspace role owns.
const namespaceExistsSQL = `
SELECT EXISTS (SELECT FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relname = 'ducklake_metadata')`

// namespaceExists checks that DuckLake's tables exist in the namespace's schema.
func (res *resolution) namespaceExists(ctx context.Context, ns Namespace) (bool, error) {
	conn, err := res.r.Clusters.Connect(ctx, ns.Lake.CatalogCluster, ns.Lake.CatalogDatabase)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var ok bool
	err = conn.QueryRow(ctx, namespaceExistsSQL, ns.SchemaName()).Scan(&ok)
	return ok, err
}

// liveViews reads the views that currently exist in the fork namespace (DuckLake's view table):
// name → stored SQL. It is the source of truth for what is a view, not recorded statuses. The
// table belongs to the workspace's role, so it is read as that role, never as an admin: whatever
// the namespace holds runs with no more than the job's own privileges.
func (res *resolution) liveViews(ctx context.Context, ns Namespace) (map[string]string, error) {
	out := map[string]string{}
	exists, err := res.namespaceExists(ctx, ns)
	if err != nil || !exists {
		return out, err
	}
	conn, err := res.r.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, res.ws.ID, ns.Lake.CatalogDatabase)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	q := fmt.Sprintf(`SELECT view_name, sql FROM %s.ducklake_view WHERE end_snapshot IS NULL`, pgx.Identifier{ns.SchemaName()}.Sanitize())
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read the fork's live views: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, sql string
		if err := rows.Scan(&name, &sql); err != nil {
			return nil, err
		}
		out[name] = sql
	}
	return out, rows.Err()
}

// deferPrelude is what follows the attach of an isolated fork's lake under alias: READ_ONLY
// attaches of the ancestors' namespaces, a view for each table materialized up the chain and not
// in the fork (pointing at the nearest ancestor that owns it, plus <table>_current for SCD2
// tables), and for a materialize target that is a live view in the fork, the drop of that view.
func (res *resolution) deferPrelude(ctx context.Context, ns Namespace, alias string, isTarget bool) ([]string, error) {
	live, err := res.liveViews(ctx, ns)
	if err != nil {
		return nil, err
	}
	var stmts []string
	var views []deferView
	defer func() {
		if isTarget {
			res.plan.TargetDrops = targetDrops(alias, res.target.Table, live, views)
			res.plan.TargetDefersTo = defersTo(res.target.Table, live, views)
		}
	}()
	if len(res.ws.Ancestors) == 0 {
		return stmts, nil // an orphaned fork: write redirect, no defer
	}
	nodes, err := res.ancestorNodes(ctx, ns.Lake.Name)
	if err != nil || len(nodes) == 0 {
		return stmts, err
	}
	ids := []string{res.ws.ID}
	for _, n := range nodes {
		ids = append(ids, n.Workspaces...)
	}
	mats, err := readMaterializations(ctx, res.r.Control, ns.Lake.Name, ids)
	if err != nil {
		return nil, err
	}
	if err := res.applyPins(ctx, ns.Lake.Name, nodes); err != nil {
		return nil, err
	}
	pre := make([]string, 0, len(nodes))
	for _, n := range nodes {
		cc, err := res.cats.Conn(ctx, n.NS.Lake.CatalogCluster, n.NS.Lake.CatalogDatabase)
		if err != nil {
			return nil, err
		}
		if err := res.plan.addDir(n.NS, false); err != nil {
			return nil, err
		}
		opts := append(n.NS.readOnlyOptions(), Option{"META_SECRET", Literal(cc.Secret)})
		if n.Pin != nil {
			opts = append(opts, Option{"SNAPSHOT_VERSION", fmt.Sprint(*n.Pin)})
		}
		pre = append(pre, Render(true, "ducklake:postgres:"+cc.Path, n.Alias, opts))
		res.plan.Tools = append(res.plan.Tools, ToolAttach{Lake: ns.Lake.Name, Alias: n.Alias, Workspace: n.Workspaces[0], ReadOnly: true,
			SQL: Render(true, "ducklake:postgres:"+cc.ToolPath, n.Alias, opts), CertNote: cc.CertNote,
			Path: "ducklake:postgres:" + cc.DBTPath, Options: withoutOptions(opts, "READ_ONLY")})
	}
	views = deferList(nodes, mats, res.ws.ID)
	vs := viewStatements(alias, views, live)
	if len(vs) > 1 {
		// One DuckLake commit (one snapshot) for all the views, not one per view.
		vs = append(append([]string{"BEGIN TRANSACTION"}, vs...), "COMMIT")
	}
	return append(append(pre, stmts...), vs...), nil
}

// targetDrops are the statements that turn a materialize target that is a view in the fork (a
// live one, or one this job creates) into room for a real table: CREATE [OR REPLACE] TABLE
// refuses to replace a view. The view is live in the catalog, not a recorded status, that
// decides: after a failed run a status cannot tell a defer view from a real table.
func targetDrops(alias, table string, live map[string]string, views []deferView) []string {
	var out []string
	for _, name := range []string{table, table + "_current"} {
		_, isView := live[name]
		for _, v := range views {
			isView = isView || v.Name == name
		}
		if isView {
			out = append(out, "DROP VIEW IF EXISTS "+Ident(alias)+"."+Ident(name))
		}
	}
	return out
}

// deferView is one view to create in the fork: name, the ancestor alias it reads, its query, and
// the ancestor workspace whose table it reads.
type deferView struct {
	Name, Owner, Query, From string
}

// defersTo is the ancestor a materialize target that is a defer view reads ("" when it is not
// one; "an ancestor" for a live view no ancestor's record explains).
func defersTo(table string, live map[string]string, views []deferView) string {
	for _, v := range views {
		if v.Name == table {
			return v.From
		}
	}
	if _, ok := live[table]; ok {
		return "an ancestor"
	}
	return ""
}

// deferList lists the views of the deferred tables: for every table materialized up the chain
// (latest status materialized; in a pinned node, recorded and present at the pinned snapshot) and
// not owned by the fork, one reading the nearest owner, plus <table>_current for SCD2 tables.
func deferList(nodes []*ancestorNode, mats map[string]map[string]materialization, fork string) []deferView {
	own := map[string]bool{}
	for t, m := range mats[fork] {
		if m.Status == "materialized" || m.SnapshotID != nil {
			own[t] = true
		}
	}
	var views []deferView
	seen := map[string]bool{}
	for _, n := range nodes {
		for _, w := range n.Workspaces {
			for t, m := range mats[w] {
				if seen[t] || own[t] || (n.AtPin == nil && m.Status != "materialized") || (n.AtPin != nil && !n.AtPin[t]) {
					continue
				}
				seen[t] = true
				src := Ident(n.Alias) + "." + Ident(t)
				views = append(views, deferView{t, n.Alias, "SELECT * FROM " + src, w})
				if m.scd2() {
					views = append(views, deferView{t + "_current", n.Alias, "SELECT * FROM " + src + " WHERE is_current", w})
				}
			}
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
	return views
}

// viewStatements creates the views that do not exist (IF NOT EXISTS: a real fork table of that
// name wins, so a concurrent first materialize is harmless), replaces a live view that reads
// another ancestor than the nearest owner (an ancestor nearer the fork materialized the table
// since), and leaves a correct one alone, so a job does not write the catalog when nothing
// changed.
func viewStatements(alias string, views []deferView, live map[string]string) []string {
	var out []string
	for _, v := range views {
		sql, exists := live[v.Name]
		switch {
		case !exists:
			out = append(out, fmt.Sprintf("CREATE VIEW IF NOT EXISTS %s.%s AS %s", Ident(alias), Ident(v.Name), v.Query))
		case !strings.Contains(sql, v.Owner):
			out = append(out, fmt.Sprintf("CREATE OR REPLACE VIEW %s.%s AS %s", Ident(alias), Ident(v.Name), v.Query))
		}
	}
	return out
}
