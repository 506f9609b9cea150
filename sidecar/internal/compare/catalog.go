package compare

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The catalog of a compared database is read as the cluster's admin, but its objects belong to
// roles dataenv does not trust. So the snapshot reads pg_catalog only, through pg_catalog's own
// functions (format_type, pg_get_*def, pg_get_expr: deparsers that run no user code), on a
// connection whose search_path is pinned to pg_catalog, pg_temp; nothing of the database is
// called. Objects are named the same way in both databases (format %I, regclass output under the
// same search_path), so names match across them.

// userSchemasCTE is the schemas compared: not the system's, not temporary or TOAST ones, and not
// a schema dataenv made (its comment starts with the marker, $1). Objects an extension owns
// (pg_depend deptype e) are left out with them.
const userSchemasCTE = `WITH ns AS (
    SELECT n.oid, n.nspname FROM pg_catalog.pg_namespace n
     WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
       AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%'
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_description d
                        WHERE d.classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND d.objoid = n.oid
                          AND pg_catalog.starts_with(d.description, $1))
), ext AS (
    SELECT e.classid, e.objid FROM pg_catalog.pg_depend e WHERE e.deptype = 'e'
)
`

// notExtensionRel is true for a pg_class row c that no extension owns.
const notExtensionRel = `NOT EXISTS (SELECT FROM ext WHERE ext.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND ext.objid = c.oid)`

// One query per object kind; each returns (name, relation, attribute values...).
const (
	tablesSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I', ns.nspname, c.relname), '',
       CASE c.relkind WHEN 'p' THEN 'partitioned table' WHEN 'f' THEN 'foreign table' ELSE 'table' END,
       CASE c.relpersistence WHEN 'u' THEN 'unlogged' ELSE '' END
  FROM pg_catalog.pg_class c JOIN ns ON ns.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p', 'f') AND ` + notExtensionRel

	columnsSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I.%I', ns.nspname, c.relname, a.attname), pg_catalog.format('%I.%I', ns.nspname, c.relname),
       pg_catalog.format_type(a.atttypid, a.atttypmod),
       CASE WHEN a.attnotnull THEN 'not null' ELSE 'nullable' END,
       CASE WHEN a.attgenerated = '' THEN coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '') ELSE '' END,
       CASE a.attidentity WHEN 'a' THEN 'always' WHEN 'd' THEN 'by default' ELSE '' END,
       CASE WHEN a.attgenerated <> '' THEN coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '') ELSE '' END
  FROM pg_catalog.pg_class c JOIN ns ON ns.oid = c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relkind IN ('r', 'p', 'f') AND ` + notExtensionRel

	// Indexes that implement a primary key, unique or exclusion constraint are the constraint's.
	indexesSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I', ns.nspname, i.relname), pg_catalog.format('%I.%I', ns.nspname, c.relname),
       pg_catalog.pg_get_indexdef(x.indexrelid)
  FROM pg_catalog.pg_index x
  JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
  JOIN pg_catalog.pg_class c ON c.oid = x.indrelid
  JOIN ns ON ns.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p', 'm', 'f') AND ` + notExtensionRel + `
   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k
                    WHERE k.conindid = x.indexrelid AND k.conrelid = x.indrelid AND k.contype IN ('p', 'u', 'x'))`

	// NOT NULL constraints (cataloged from PostgreSQL 18) are the column's nullability.
	constraintsSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I.%I', ns.nspname, c.relname, k.conname), pg_catalog.format('%I.%I', ns.nspname, c.relname),
       pg_catalog.pg_get_constraintdef(k.oid)
  FROM pg_catalog.pg_constraint k
  JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
  JOIN ns ON ns.oid = c.relnamespace
 WHERE k.contype <> 'n' AND ` + notExtensionRel

	triggersSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I.%I', ns.nspname, c.relname, g.tgname), pg_catalog.format('%I.%I', ns.nspname, c.relname),
       pg_catalog.pg_get_triggerdef(g.oid)
  FROM pg_catalog.pg_trigger g
  JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid
  JOIN ns ON ns.oid = c.relnamespace
 WHERE NOT g.tgisinternal AND ` + notExtensionRel

	viewsSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I', ns.nspname, c.relname), '',
       CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END,
       pg_catalog.pg_get_viewdef(c.oid)
  FROM pg_catalog.pg_class c JOIN ns ON ns.oid = c.relnamespace
 WHERE c.relkind IN ('v', 'm') AND ` + notExtensionRel

	// Functions and procedures by signature; aggregates and window functions have no
	// pg_get_functiondef.
	functionsSQL = userSchemasCTE + `
SELECT pg_catalog.format('%I.%I(%s)', ns.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid)), '',
       CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END,
       pg_catalog.pg_get_functiondef(p.oid)
  FROM pg_catalog.pg_proc p JOIN ns ON ns.oid = p.pronamespace
 WHERE p.prokind IN ('f', 'p')
   AND NOT EXISTS (SELECT FROM ext WHERE ext.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND ext.objid = p.oid)`
)

// snapshotQueries are the queries of a snapshot: the kind, the query and the names of the
// attributes its columns after (name, relation) hold.
var snapshotQueries = []struct {
	kind  string
	sql   string
	attrs []string
}{
	{KindTable, tablesSQL, []string{"kind", "persistence"}},
	{KindColumn, columnsSQL, []string{"type", "nullability", "default", "identity", "generated"}},
	{KindConstraint, constraintsSQL, []string{"definition"}},
	{KindIndex, indexesSQL, []string{"definition"}},
	{KindTrigger, triggersSQL, []string{"definition"}},
	{KindView, viewsSQL, []string{"kind", "definition"}},
	{KindFunction, functionsSQL, []string{"kind", "definition"}},
}

// Querier runs the snapshot's queries (a pgx.Tx in a read-only transaction).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadSnapshot reads the schema objects of the database q is connected to. marker starts the
// comment of the schemas dataenv made, which are left out.
func ReadSnapshot(ctx context.Context, q Querier, marker string) ([]Object, error) {
	var out []Object
	for _, sq := range snapshotQueries {
		rows, err := q.Query(ctx, sq.sql, marker)
		if err != nil {
			return nil, fmt.Errorf("read the %ss: %w", sq.kind, err)
		}
		objs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Object, error) {
			vals := make([]string, 2+len(sq.attrs))
			dest := make([]any, len(vals))
			for i := range vals {
				dest[i] = &vals[i]
			}
			if err := row.Scan(dest...); err != nil {
				return Object{}, err
			}
			o := Object{Kind: sq.kind, Name: vals[0], Relation: vals[1]}
			for i, name := range sq.attrs {
				o.Attrs = append(o.Attrs, Attr{Name: name, Value: vals[2+i]})
			}
			return o, nil
		})
		if err != nil {
			return nil, fmt.Errorf("read the %ss: %w", sq.kind, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}
