package lake

import (
	"context"
	"encoding/json"
	"fmt"

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
// workspace (which must have read access to ns). It reports how many it recorded.
func (res *resolution) recordOutsideTables(ctx context.Context, ns Namespace, asWorkspace, owner string, owners []string) (int, error) {
	conn, err := res.r.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, asWorkspace, ns.Lake.CatalogDatabase)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
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
	exists, err := res.namespaceExists(ctx, ns)
	if err != nil || !exists {
		return err
	}
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
	_, err = res.recordOutsideTables(ctx, ns, res.ws.ID, owners[len(owners)-1], owners)
	return err
}
