package lake

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Tables written into a namespace without a dataenv job (a member's own DuckDB session through
// dataenv.duckdb_script) have no materialization record, so fork_materialization would not show
// them and forks below would not defer to them. Whenever dataenv attaches a namespace for a job
// (its own, or an ancestor's it defers to), it records such tables: source 'outside', status
// materialized, the snapshot that created them and their columns.

// outsideTablesSQL lists the live tables of DuckLake's main schema in a metadata schema, with
// the snapshot that created them and their columns. Run as the workspace role (it reads tables a
// workspace role owns).
const outsideTablesSQL = `
SELECT t.table_name, t.begin_snapshot,
       coalesce((SELECT json_agg(json_build_object('name', c.column_name, 'type', c.column_type) ORDER BY c.column_order)
                   FROM %[1]s.ducklake_column c
                  WHERE c.table_id = t.table_id AND c.end_snapshot IS NULL AND c.parent_column IS NULL), '[]')::text
  FROM %[1]s.ducklake_table t JOIN %[1]s.ducklake_schema s ON s.schema_id = t.schema_id
 WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL AND s.schema_name = 'main'`

const recordOutsideSQL = `
INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, snapshot_id, columns, metadata_schema, request_id, source)
SELECT $1, $2, t.name, 'materialized', 'replace', t.snap, t.cols::jsonb, $6, gen_random_uuid(), 'outside'
  FROM unnest($3::text[], $4::bigint[], $5::text[]) AS t(name, snap, cols)
 WHERE NOT EXISTS (SELECT FROM dataenv.materializations m WHERE m.workspace = ANY($7) AND m.lake = $2 AND m.table_name = t.name)`

// recordOutsideTables records the tables of ns that no workspace of owners has a record of, as
// materialized by owner (the workspace whose namespace it is), reading the catalog as asRole's
// workspace (which must have read access to ns). It reports how many it recorded; a namespace
// whose DuckLake catalog does not exist yet has none.
func (res *resolution) recordOutsideTables(ctx context.Context, ns Namespace, asWorkspace, owner string, owners []string) (int, error) {
	conn, err := res.r.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, asWorkspace, ns.Lake.CatalogDatabase)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	// On the same connection: one session per job, not an admin one just for this.
	var exists bool
	if err := conn.QueryRow(ctx, namespaceExistsSQL, ns.SchemaName()).Scan(&exists); err != nil {
		return 0, fmt.Errorf("look for the DuckLake catalog of lake %q: %w", ns.Lake.Name, err)
	}
	if !exists {
		return 0, nil
	}
	rows, err := conn.Query(ctx, fmt.Sprintf(outsideTablesSQL, pgx.Identifier{ns.SchemaName()}.Sanitize()))
	if err != nil {
		return 0, fmt.Errorf("list the tables of lake %q: %w", ns.Lake.Name, err)
	}
	type table struct {
		name    string
		snap    int64
		columns string
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		return t, r.Scan(&t.name, &t.snap, &t.columns)
	})
	if err != nil {
		return 0, fmt.Errorf("list the tables of lake %q: %w", ns.Lake.Name, err)
	}
	if len(tables) == 0 {
		return 0, nil
	}
	var tnames, cols []string
	var snaps []int64
	for _, t := range tables {
		if !json.Valid([]byte(t.columns)) {
			t.columns = "[]"
		}
		tnames, snaps, cols = append(tnames, t.name), append(snaps, t.snap), append(cols, t.columns)
	}
	// One statement for every table: a lake of a thousand tables costs one round trip per job.
	tag, err := res.r.Control.Exec(ctx, recordOutsideSQL, owner, ns.Lake.Name, tnames, snaps, cols, ns.SchemaName(), owners)
	if err != nil {
		return 0, fmt.Errorf("record the tables of lake %q: %w", ns.Lake.Name, err)
	}
	n := int(tag.RowsAffected())
	return n, nil
}

// recordOwnOutsideTables records the tables written outside dataenv in the workspace's own
// namespace of a lake (once DuckLake's catalog exists there), as the workspace's.
func (res *resolution) recordOwnOutsideTables(ctx context.Context, ns Namespace) error {
	owners := []string{res.ws.ID}
	if !ns.Forked {
		// A shared fork writes its parent's namespace: the tables there are the parent's (and
		// its own records count).
		for _, a := range res.ws.Ancestors {
			if l, ok := res.lakes[a.ID][ns.Lake.Name]; ok && namespaceOf(a.ID, a.IsFork, l, ns.Storage).Key() == ns.Key() {
				owners = append(owners, a.ID)
			}
		}
	}
	_, err := res.recordOutsideTables(ctx, ns, res.ws.ID, owners[len(owners)-1], owners)
	return err
}

// recordOwn records the tables written outside dataenv in ns, the namespace a job attaches as
// lake name with a. A fork's defer prelude is decided from these records, so a namespace that gets
// one records them first; otherwise, in a run job (res.overlap), they are left to Plan.Bookkeep,
// beside the job: the job reads the catalog itself, never the records, and a table it makes is
// one the next attach would record all the same.
func (res *resolution) recordOwn(ctx context.Context, name string, ns Namespace, a *Attach) {
	record := func(ctx context.Context) string {
		if err := res.recordOwnOutsideTables(ctx, ns); err != nil {
			return fmt.Sprintf("lake %s: tables written outside dataenv not checked: %v", name, err)
		}
		return ""
	}
	if res.overlap && !(ns.Forked && !hasOption(a.Options, "READ_ONLY")) {
		res.plan.bookkeeping = append(res.plan.bookkeeping, record)
		return
	}
	if note := record(ctx); note != "" {
		res.plan.Notes = append(res.plan.Notes, note)
	}
}

// Bookkeep runs what ResolveRun left to run beside the job, in the background, and returns the
// function that waits for it and adds its notes to the plan's (calling it again does nothing).
// Call it before reading Notes, and before Close.
func (p *Plan) Bookkeep(ctx context.Context) (wait func()) {
	if len(p.bookkeeping) == 0 {
		return func() {}
	}
	tasks := p.bookkeeping
	p.bookkeeping = nil
	notes := make(chan []string, 1)
	go func() {
		var out []string
		for _, task := range tasks {
			if n := task(ctx); n != "" {
				out = append(out, n)
			}
		}
		notes <- out
	}()
	return sync.OnceFunc(func() { p.Notes = append(p.Notes, <-notes...) })
}
