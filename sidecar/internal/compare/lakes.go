package compare

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// LakeResult is one lake of the fork: isolated (its own namespace, reading what it did not
// materialize from its ancestors) or shared (writing the parent's namespace).
type LakeResult struct {
	Lake     string      `json:"lake"`
	Behavior string      `json:"behavior"`
	Status   string      `json:"status"`
	Note     string      `json:"note,omitempty"`
	Tables   []LakeTable `json:"tables"`
}

// LakeTable is a table the fork materialized, beside the parent's state of it.
type LakeTable struct {
	Table string `json:"table"`
	State string `json:"state"` // fork-materialized
	// Status, RowCount, MaterializedAt, Source: the fork's latest record of it (row count NULL
	// when not recorded, as for a table written outside dataenv jobs).
	Status         string    `json:"status"`
	RowCount       *int64    `json:"row_count"`
	MaterializedAt time.Time `json:"materialized_at"`
	Source         string    `json:"source"`
	// ParentState: materialized (the parent has its own), deferred (the parent reads it from
	// ParentFrom, an ancestor of its), absent (nobody above the fork materialized it).
	ParentState          string     `json:"parent_state"`
	ParentFrom           string     `json:"parent_from,omitempty"`
	ParentRowCount       *int64     `json:"parent_row_count"`
	ParentMaterializedAt *time.Time `json:"parent_materialized_at"`
	// ParentNewer: the parent's version was materialized after the fork's.
	ParentNewer bool   `json:"parent_newer"`
	Detail      string `json:"detail"`
}

// lakeTablesSQL lists the fork's ($1) lakes and, for isolated ones, the tables the fork
// materialized (dataenv.fork_materialization's fork-materialized rows, with the fork's latest
// record), each with the latest successful record of the nearest workspace among the parent ($2)
// and its ancestors.
const lakeTablesSQL = `
WITH mine AS (
    SELECT r.lake, r.table_name FROM dataenv.fork_materialization_rows() r
     WHERE r.workspace = $1 AND r.state = 'fork-materialized'
), above AS (
    SELECT 0 AS depth, $2::text AS ancestor WHERE $2::text <> ''
    UNION ALL
    SELECT a.depth, a.ancestor FROM dataenv.workspace_ancestors($2) a WHERE $2::text <> ''
)
SELECT l.name, coalesce(l.fork_behavior, ''), t.table_name, t.status, t.row_count, t.created_at, t.source,
       p.workspace, p.row_count, p.created_at
  FROM dataenv.lakes l
  LEFT JOIN LATERAL (
      SELECT m.table_name, m.status, m.row_count, m.created_at, m.source
        FROM mine JOIN dataenv.materialization_all m ON m.workspace = $1 AND m.lake = mine.lake AND m.table_name = mine.table_name
       WHERE mine.lake = l.name) t ON l.fork_behavior = 'isolated'
  LEFT JOIN LATERAL (
      SELECT m.workspace, m.row_count, m.created_at
        FROM above JOIN dataenv.materialization_all m ON m.workspace = above.ancestor
       WHERE m.lake = l.name AND m.table_name = t.table_name AND m.status = 'materialized'
       ORDER BY above.depth LIMIT 1) p ON t.table_name IS NOT NULL
 WHERE l.workspace = $1
 ORDER BY l.name, t.table_name`

// readLakes reads the fork's lakes and the tables it materialized; parent is "" for an orphaned
// fork.
func readLakes(ctx context.Context, q Querier, fork, parent string) ([]LakeResult, error) {
	rows, err := q.Query(ctx, lakeTablesSQL, fork, parent)
	if err != nil {
		return nil, fmt.Errorf("read the lakes of fork %q: %w", fork, err)
	}
	defer rows.Close()
	out := []LakeResult{}
	for rows.Next() {
		var lake, behavior string
		var table, status, source, from *string
		var count, parentCount *int64
		var at, parentAt *time.Time
		if err := rows.Scan(&lake, &behavior, &table, &status, &count, &at, &source, &from, &parentCount, &parentAt); err != nil {
			return nil, fmt.Errorf("read the lakes of fork %q: %w", fork, err)
		}
		if len(out) == 0 || out[len(out)-1].Lake != lake {
			out = append(out, LakeResult{Lake: lake, Behavior: behavior, Tables: []LakeTable{}})
		}
		if table == nil {
			continue
		}
		t := LakeTable{Table: *table, State: "fork-materialized", Status: *status, RowCount: count, MaterializedAt: *at,
			Source: *source, ParentState: "absent", ParentRowCount: parentCount, ParentMaterializedAt: parentAt}
		if from != nil {
			t.ParentState = "materialized"
			if *from != parent {
				t.ParentState, t.ParentFrom = "deferred", *from
			}
			t.ParentNewer = parentAt != nil && parentAt.After(*at)
		}
		t.Detail = t.describe()
		out[len(out)-1].Tables = append(out[len(out)-1].Tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the lakes of fork %q: %w", fork, err)
	}
	for i := range out {
		out[i].annotate(parent)
	}
	return out, nil
}

// annotate sets the lake's status, and a note when there is no table to list.
func (l *LakeResult) annotate(parent string) {
	switch {
	case l.Behavior == "shared":
		l.Status, l.Note = "shared", "the fork writes the parent's lake: nothing to compare"
	case len(l.Tables) > 0:
		l.Status = "isolated"
	case parent == "":
		l.Status, l.Note = "isolated", "the fork materialized no table of its own (its parent is gone)"
	default:
		l.Status, l.Note = "isolated", "the fork materialized no table of its own: every table is read from the parent's chain"
	}
}

// describe is the table's row of fork_differences: the fork's version and the parent's.
func (t LakeTable) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fork: %s at %s", rowCount(t.RowCount), stamp(t.MaterializedAt))
	if t.Status != "materialized" {
		fmt.Fprintf(&b, " (latest run %s)", t.Status)
	}
	switch t.ParentState {
	case "absent":
		b.WriteString("; parent: absent (not materialized above the fork)")
	case "deferred":
		fmt.Fprintf(&b, "; parent: deferred to %s, %s at %s", t.ParentFrom, rowCount(t.ParentRowCount), stamp(*t.ParentMaterializedAt))
	default:
		fmt.Fprintf(&b, "; parent: materialized, %s at %s", rowCount(t.ParentRowCount), stamp(*t.ParentMaterializedAt))
	}
	if t.ParentNewer {
		b.WriteString(" (newer than the fork's)")
	}
	return b.String()
}

func rowCount(n *int64) string {
	if n == nil {
		return "row count not recorded"
	}
	if *n == 1 {
		return "1 row"
	}
	return fmt.Sprintf("%d rows", *n)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
