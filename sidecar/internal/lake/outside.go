package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/runner/protocol"
)

// Tables written into a namespace without a dataenv job (a member's own DuckDB session through
// dataenv.duckdb_script) have no materialization record, so fork_materialization would not show
// them and forks below would not defer to them. Whenever dataenv attaches a namespace for a job
// (its own, or an ancestor's it defers to), it records such tables: source 'outside', status
// materialized, the snapshot that created them and their columns.

// outsideTablesSQL lists the live tables of DuckLake's main schema in a metadata schema, with
// the snapshot that created them and their columns. Run as the workspace role (it reads tables a
// workspace role owns). The columns are aggregated in one pass and joined: DuckLake's catalog has
// no index on ducklake_column.table_id, and a subquery per table scanned every column of the lake
// once per table (1.3 s a job at 1,000 tables of 15 columns, against 26 ms this way).
const outsideTablesSQL = `
SELECT t.table_name, t.begin_snapshot, coalesce(c.cols, '[]')::text
  FROM %[1]s.ducklake_table t JOIN %[1]s.ducklake_schema s ON s.schema_id = t.schema_id
  LEFT JOIN (SELECT table_id, json_agg(json_build_object('name', column_name, 'type', column_type) ORDER BY column_order) AS cols
               FROM %[1]s.ducklake_column
              WHERE end_snapshot IS NULL AND parent_column IS NULL
              GROUP BY table_id) c ON c.table_id = t.table_id
 WHERE t.end_snapshot IS NULL AND s.end_snapshot IS NULL AND s.schema_name = 'main'`

const recordOutsideSQL = `
INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, snapshot_id, columns, metadata_schema, request_id, source)
SELECT $1, $2, t.name, 'materialized', 'replace', t.snap, t.cols::jsonb, $6, gen_random_uuid(), 'outside'
  FROM unnest($3::text[], $4::bigint[], $5::text[]) AS t(name, snap, cols)
 WHERE NOT EXISTS (SELECT FROM dataenv.materializations m WHERE m.workspace = ANY($7) AND m.lake = $2 AND m.table_name = t.name)`

// outsideTable is a live table of DuckLake's main schema in a namespace: its name, the snapshot
// that created it, its columns as JSON.
type outsideTable struct {
	name    string
	snap    int64
	columns string
}

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
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outsideTable, error) {
		var t outsideTable
		return t, r.Scan(&t.name, &t.snap, &t.columns)
	})
	if err != nil {
		return 0, fmt.Errorf("list the tables of lake %q: %w", ns.Lake.Name, err)
	}
	return res.r.recordTables(ctx, ns, owner, owners, tables)
}

// recordTables records those of tables (of ns) that no workspace of owners has a record of, as
// owner's.
func (r *Resolver) recordTables(ctx context.Context, ns Namespace, owner string, owners []string, tables []outsideTable) (int, error) {
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
	// One statement for every table: a lake of a thousand tables costs one round trip per job
	// (and no commit to wait for when every table has its record: nothing was written).
	tag, err := r.Control.Exec(ctx, recordOutsideSQL, owner, ns.Lake.Name, tnames, snaps, cols, ns.SchemaName(), owners)
	if err != nil {
		return 0, fmt.Errorf("record the tables of lake %q: %w", ns.Lake.Name, err)
	}
	return int(tag.RowsAffected()), nil
}

// owners are the workspaces whose records count for the tables of ns, the workspace's own
// namespace of a lake, the last of them the one the namespace is: the workspace, and for a shared
// fork (which writes its parent's namespace) the ancestors sharing it.
func (res *resolution) owners(ns Namespace) []string {
	owners := []string{res.ws.ID}
	if !ns.Forked {
		for _, a := range res.ws.Ancestors {
			if l, ok := res.lakes[a.ID][ns.Lake.Name]; ok && namespaceOf(a.ID, a.IsFork, l, ns.Storage).Key() == ns.Key() {
				owners = append(owners, a.ID)
			}
		}
	}
	return owners
}

// recordOwn records the tables written outside dataenv in ns, the namespace a job attaches as
// lake name with a. A fork's defer prelude is decided from these records, so a namespace that gets
// one records them first, on a connection of its own. Otherwise, in a run job (res.overlap),
// the job's runner lists them (a probe: after dataenv's attaches, before the job's own SQL, on
// the attach's own catalog session) and Plan.Record writes them once the job is done: the job
// reads the catalog itself, never the records, and a table it makes is one the next attach
// records all the same.
func (res *resolution) recordOwn(ctx context.Context, name string, ns Namespace, a *Attach) {
	owners := res.owners(ns)
	owner := owners[len(owners)-1]
	if res.overlap && !(ns.Forked && !hasOption(a.Options, "READ_ONLY")) {
		res.plan.Probes = append(res.plan.Probes, outsideTablesProbe(a.Alias, ns))
		res.plan.probed = append(res.plan.probed, func(ctx context.Context, r protocol.Result) string {
			tables, err := probedTables(r)
			if err == nil {
				_, err = res.r.recordTables(ctx, ns, owner, owners, tables)
			}
			return notChecked(name, err)
		})
		return
	}
	_, err := res.recordOutsideTables(ctx, ns, res.ws.ID, owner, owners)
	if n := notChecked(name, err); n != "" {
		res.plan.Notes = append(res.plan.Notes, n)
	}
}

// notChecked is the note of lake name whose tables written outside dataenv could not be
// recorded ("" when err is nil).
func notChecked(name string, err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("lake %s: tables written outside dataenv not checked: %v", name, err)
}

// outsideTablesProbe lists the tables of ns from a job's DuckDB, through the catalog session of
// its attach under alias (DuckLake names it __ducklake_metadata_<alias>): outsideTablesSQL run
// there by the postgres extension, as the workspace's role.
func outsideTablesProbe(alias string, ns Namespace) string {
	inner := fmt.Sprintf(outsideTablesSQL, pgx.Identifier{ns.SchemaName()}.Sanitize())
	return "SELECT * FROM postgres_query(" + Literal("__ducklake_metadata_"+alias) + ", " + Literal(inner) + ")"
}

// probedTables reads the rows of outsideTablesProbe.
func probedTables(r protocol.Result) ([]outsideTable, error) {
	if r.Error != "" {
		return nil, fmt.Errorf("listing them in the job failed: %s", r.Error)
	}
	if r.Truncated {
		return nil, errors.New("the list of its tables is too long to read from the job")
	}
	tables := make([]outsideTable, 0, len(r.Rows))
	for _, row := range r.Rows {
		var t outsideTable
		if len(row) != 3 {
			return nil, fmt.Errorf("a row of %d columns, want 3", len(row))
		}
		if err := errors.Join(json.Unmarshal(row[0], &t.name), json.Unmarshal(row[1], &t.snap), json.Unmarshal(row[2], &t.columns)); err != nil {
			return nil, fmt.Errorf("read the list of its tables: %w", err)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// Record writes what the probes of the plan found, from the job's Result.Probes (one per
// Plan.Probes entry), and adds its notes to the plan's. Call it once the job is done, before
// reading Notes.
func (p *Plan) Record(ctx context.Context, probes []protocol.Result) {
	for i, handle := range p.probed {
		if i >= len(probes) {
			p.Notes = append(p.Notes, "tables written outside dataenv not checked: the job returned no list of them")
			return
		}
		if n := handle(ctx, probes[i]); n != "" {
			p.Notes = append(p.Notes, p.Scrub(n))
		}
	}
}
