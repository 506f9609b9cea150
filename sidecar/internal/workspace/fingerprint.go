package workspace

import (
	"context"
	"fmt"
)

// fingerprintSQL digests what a schema-only dump of the database depends on, cheaply (no dump):
// every catalog row of user objects by OID and xmin (any DDL writes a new row version, so xmin
// changes; a dropped object's row is gone), except pg_class, which DML rewrites in place or by
// new versions (TRUNCATE, REFRESH, VACUUM FULL move relfilenode; VACUUM and ANALYZE update
// statistics): its rows are digested by the columns a dump shows. TOAST relations (REFRESH
// MATERIALIZED VIEW makes new ones) and temporary objects are left out. pg_index is digested with its
// validity, which CREATE INDEX CONCURRENTLY changes in place. A change anywhere gives another
// fingerprint; an unchanged schema gives the same one, so a schema template is reused exactly
// as long as it is current. Rows, sequence positions and large objects are not part of it.
const fingerprintSQL = `
WITH skip AS (SELECT oid FROM pg_catalog.pg_namespace
               WHERE nspname LIKE 'pg\_toast%' OR nspname LIKE 'pg\_temp\_%'),
rel AS (SELECT oid FROM pg_catalog.pg_class WHERE oid >= 16384 AND relnamespace NOT IN (SELECT oid FROM skip))
SELECT pg_catalog.md5(pg_catalog.string_agg(x, ',' ORDER BY x)) FROM (
    SELECT 'class ' || pg_catalog.md5(ROW(c.oid, c.relname, c.relnamespace, c.reltype, c.relowner, c.relam, c.reltablespace,
           c.relkind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.relreplident, c.relispartition,
           c.relacl, c.reloptions, c.relpartbound::text, c.relnatts, c.relchecks, c.relhastriggers, c.relhasrules,
           c.reloftype)::text) AS x
      FROM pg_catalog.pg_class c WHERE c.oid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'attribute ' || attrelid || '.' || attnum || ':' || xmin FROM pg_catalog.pg_attribute WHERE attrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'index ' || indexrelid || ':' || xmin || ':' || indisvalid || indisready || indislive FROM pg_catalog.pg_index WHERE indexrelid IN (SELECT oid FROM rel)
    UNION ALL SELECT 'namespace ' || oid || ':' || xmin FROM pg_catalog.pg_namespace
     WHERE (oid >= 16384 OR nspname = 'public') AND oid NOT IN (SELECT oid FROM skip)
    UNION ALL SELECT 'type ' || oid || ':' || xmin FROM pg_catalog.pg_type WHERE oid >= 16384 AND typnamespace NOT IN (SELECT oid FROM skip)
    UNION ALL SELECT 'proc ' || oid || ':' || xmin FROM pg_catalog.pg_proc WHERE oid >= 16384
    UNION ALL SELECT 'constraint ' || oid || ':' || xmin FROM pg_catalog.pg_constraint WHERE oid >= 16384
    UNION ALL SELECT 'attrdef ' || oid || ':' || xmin FROM pg_catalog.pg_attrdef WHERE oid >= 16384
    UNION ALL SELECT 'trigger ' || oid || ':' || xmin FROM pg_catalog.pg_trigger WHERE oid >= 16384
    UNION ALL SELECT 'rewrite ' || oid || ':' || xmin FROM pg_catalog.pg_rewrite WHERE oid >= 16384
    UNION ALL SELECT 'policy ' || oid || ':' || xmin FROM pg_catalog.pg_policy
    UNION ALL SELECT 'description ' || classoid || '.' || objoid || '.' || objsubid || ':' || xmin FROM pg_catalog.pg_description
     WHERE objoid >= 16384 OR (classoid = 'pg_catalog.pg_namespace'::pg_catalog.regclass AND objoid = 2200)
    UNION ALL SELECT 'sequence ' || seqrelid || ':' || xmin FROM pg_catalog.pg_sequence WHERE seqrelid >= 16384
    UNION ALL SELECT 'enum ' || oid || ':' || xmin FROM pg_catalog.pg_enum WHERE oid >= 16384
    UNION ALL SELECT 'collation ' || oid || ':' || xmin FROM pg_catalog.pg_collation WHERE oid >= 16384
    UNION ALL SELECT 'operator ' || oid || ':' || xmin FROM pg_catalog.pg_operator WHERE oid >= 16384
    UNION ALL SELECT 'opclass ' || oid || ':' || xmin FROM pg_catalog.pg_opclass WHERE oid >= 16384
    UNION ALL SELECT 'opfamily ' || oid || ':' || xmin FROM pg_catalog.pg_opfamily WHERE oid >= 16384
    UNION ALL SELECT 'amop ' || oid || ':' || xmin FROM pg_catalog.pg_amop WHERE oid >= 16384
    UNION ALL SELECT 'amproc ' || oid || ':' || xmin FROM pg_catalog.pg_amproc WHERE oid >= 16384
    UNION ALL SELECT 'cast ' || oid || ':' || xmin FROM pg_catalog.pg_cast WHERE oid >= 16384
    UNION ALL SELECT 'conversion ' || oid || ':' || xmin FROM pg_catalog.pg_conversion WHERE oid >= 16384
    UNION ALL SELECT 'ts_config ' || oid || ':' || xmin FROM pg_catalog.pg_ts_config WHERE oid >= 16384
    UNION ALL SELECT 'ts_config_map ' || mapcfg || '.' || maptokentype || '.' || mapseqno || ':' || xmin FROM pg_catalog.pg_ts_config_map WHERE mapcfg >= 16384
    UNION ALL SELECT 'ts_dict ' || oid || ':' || xmin FROM pg_catalog.pg_ts_dict WHERE oid >= 16384
    UNION ALL SELECT 'ts_parser ' || oid || ':' || xmin FROM pg_catalog.pg_ts_parser WHERE oid >= 16384
    UNION ALL SELECT 'ts_template ' || oid || ':' || xmin FROM pg_catalog.pg_ts_template WHERE oid >= 16384
    UNION ALL SELECT 'extension ' || oid || ':' || xmin FROM pg_catalog.pg_extension WHERE oid >= 16384
    UNION ALL SELECT 'default_acl ' || oid || ':' || xmin FROM pg_catalog.pg_default_acl
    UNION ALL SELECT 'publication ' || oid || ':' || xmin FROM pg_catalog.pg_publication
    UNION ALL SELECT 'publication_rel ' || oid || ':' || xmin FROM pg_catalog.pg_publication_rel
    UNION ALL SELECT 'publication_namespace ' || oid || ':' || xmin FROM pg_catalog.pg_publication_namespace
    UNION ALL SELECT 'statistic_ext ' || oid || ':' || xmin FROM pg_catalog.pg_statistic_ext
    UNION ALL SELECT 'event_trigger ' || oid || ':' || xmin FROM pg_catalog.pg_event_trigger
    UNION ALL SELECT 'fdw ' || oid || ':' || xmin FROM pg_catalog.pg_foreign_data_wrapper WHERE oid >= 16384
    UNION ALL SELECT 'server ' || oid || ':' || xmin FROM pg_catalog.pg_foreign_server WHERE oid >= 16384
    UNION ALL SELECT 'foreign_table ' || ftrelid || ':' || xmin FROM pg_catalog.pg_foreign_table
    UNION ALL SELECT 'inherits ' || inhrelid || '.' || inhseqno || ':' || xmin FROM pg_catalog.pg_inherits
    UNION ALL SELECT 'partitioned ' || partrelid || ':' || xmin FROM pg_catalog.pg_partitioned_table
    UNION ALL SELECT 'aggregate ' || aggfnoid::oid || ':' || xmin FROM pg_catalog.pg_aggregate WHERE aggfnoid::oid >= 16384
    UNION ALL SELECT 'range ' || rngtypid || ':' || xmin FROM pg_catalog.pg_range WHERE rngtypid >= 16384
    UNION ALL SELECT 'language ' || oid || ':' || xmin FROM pg_catalog.pg_language WHERE oid >= 16384
    UNION ALL SELECT 'transform ' || oid || ':' || xmin FROM pg_catalog.pg_transform
    UNION ALL SELECT 'am ' || oid || ':' || xmin FROM pg_catalog.pg_am WHERE oid >= 16384
    UNION ALL SELECT 'init_privs ' || classoid || '.' || objoid || '.' || objsubid || ':' || xmin FROM pg_catalog.pg_init_privs WHERE objoid >= 16384
    UNION ALL SELECT 'depend ' || classid || '.' || objid || '.' || objsubid || '.' || refclassid || '.' || refobjid || '.' || refobjsubid || deptype::text
      FROM pg_catalog.pg_depend WHERE objid >= 16384
       AND (classid <> 'pg_catalog.pg_class'::pg_catalog.regclass OR objid IN (SELECT oid FROM rel))
       AND (classid <> 'pg_catalog.pg_type'::pg_catalog.regclass
            OR objid NOT IN (SELECT oid FROM pg_catalog.pg_type WHERE typnamespace IN (SELECT oid FROM skip)))
) f`

func (p *parentPlan) readFingerprint(ctx context.Context, tx querier) error {
	if err := tx.QueryRow(ctx, fingerprintSQL).Scan(&p.Fingerprint); err != nil {
		return fmt.Errorf("schema fingerprint: %w", err)
	}
	return nil
}
