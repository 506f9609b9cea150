package workspace

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
)

// adminExtension is an extension of the parent that a restore by the copy's owner cannot make
// (it is not trusted: PostGIS, bloom, earthdistance, ...) but the cluster's admin, a superuser,
// can. The admin creates it, with the extensions it requires, in the copy's database before the
// database is given to its owner (cluster.CreateOptions.Prepare), so that the objects of the
// parent that use it (a geometry column, a bloom index) are restored like any other. The restore
// leaves out what would make it again.
type adminExtension struct {
	OID           uint32
	Name, Version string
	Schema        string
	SchemaOID     uint32
	// MakeSchema: the extension's schema is one of the parent's own (not template0's, not made
	// by an extension's script), which the admin makes first; the restore leaves it out.
	MakeSchema             bool
	Comment, SchemaComment *string
	Requires               []uint32
	// Required: trusted, made by the admin only because an untrusted extension requires it.
	Required bool
	// Config are the extension's configuration tables and sequences (pg_extension_config_dump).
	// They belong to the admin in the copy, so a restore as the copy's owner may not fill them:
	// the admin copies their rows itself (copyConfigRows).
	Config []configRelation
	// Wrappers are the extension's foreign-data wrappers: the restore, as the copy's owner,
	// makes the parent's servers of them, which needs USAGE (granted before the restore; the
	// finish then sets the parent's privileges on them).
	Wrappers []string
}

// adminExtensionsSQL: the extensions only a superuser may create (untrustedExtensionSQL) whose version the server has, with every extension they require, in any
// order (adminExtensionOrder sorts them). Extensions of template0 (OID below 16384) exist in
// every new database and are left out.
const adminExtensionsSQL = `
WITH RECURSIVE need AS (
    SELECT x.oid, false AS required FROM pg_catalog.pg_extension x WHERE ` + untrustedExtensionSQL + `
    UNION
    SELECT d.refobjid, true FROM need JOIN pg_catalog.pg_depend d
        ON d.classid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.objid = need.oid
       AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'n'
)
SELECT x.oid, x.extname, x.extversion, n.nspname, n.oid,
       n.oid >= 16384 AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend e WHERE e.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass
                                        AND e.objid = n.oid AND e.deptype = 'e'),
       pg_catalog.obj_description(x.oid, 'pg_extension'), pg_catalog.obj_description(n.oid, 'pg_namespace'),
       ARRAY(SELECT d.refobjid FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.objid = x.oid AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'n'),
       bool_and(need.required),
       coalesce((SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('name', pg_catalog.format('%I.%I', cn.nspname, c.relname),
                   'oid', c.oid::bigint, 'sequence', c.relkind = 'S', 'condition', coalesce(x.extcondition[u.i], '')) ORDER BY u.i)
                   FROM pg_catalog.unnest(x.extconfig) WITH ORDINALITY u(oid, i)
                   JOIN pg_catalog.pg_class c ON c.oid = u.oid JOIN pg_catalog.pg_namespace cn ON cn.oid = c.relnamespace), '[]'),
       EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions v WHERE v.name = x.extname AND v.version = x.extversion),
       ARRAY(SELECT w.fdwname::text FROM pg_catalog.pg_foreign_data_wrapper w JOIN pg_catalog.pg_depend d
                 ON d.classid = 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass AND d.objid = w.oid AND d.deptype = 'e'
              WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.refobjid = x.oid ORDER BY 1)
  FROM need JOIN pg_catalog.pg_extension x ON x.oid = need.oid JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace
 WHERE x.oid >= 16384
 GROUP BY x.oid, x.extname, x.extversion, n.nspname, n.oid, x.extconfig, x.extcondition`

// readAdminExtensions reads what the admin makes in a copy before its restore: nothing unless
// the admin is a superuser. An extension the server does not have at the parent's version stays
// uncreatable (reported), and so does every extension that requires it.
func (p *parentPlan) readAdminExtensions(ctx context.Context, q querier) error {
	if !p.adminSuper {
		return nil
	}
	rows, err := q.Query(ctx, adminExtensionsSQL)
	if err != nil {
		return fmt.Errorf("extensions the admin makes: %w", err)
	}
	var all []adminExtension
	missing := map[uint32]bool{}
	for rows.Next() {
		var e adminExtension
		var available bool
		if err := rows.Scan(&e.OID, &e.Name, &e.Version, &e.Schema, &e.SchemaOID, &e.MakeSchema, &e.Comment, &e.SchemaComment,
			&e.Requires, &e.Required, &e.Config, &available, &e.Wrappers); err != nil {
			rows.Close()
			return fmt.Errorf("extensions the admin makes: %w", err)
		}
		if !available {
			missing[e.OID] = true
		}
		all = append(all, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("extensions the admin makes: %w", err)
	}
	p.AdminExtensions = adminExtensionOrder(all, missing)
	return nil
}

// adminExtensionOrder sorts the extensions so that each comes after those it requires, and
// drops those that cannot be made (missing) and those that require one of them.
func adminExtensionOrder(all []adminExtension, missing map[uint32]bool) []adminExtension {
	byOID := map[uint32]adminExtension{}
	for _, e := range all {
		byOID[e.OID] = e
	}
	var out []adminExtension
	done := map[uint32]bool{}
	var visit func(e adminExtension) bool
	visit = func(e adminExtension) bool {
		if done[e.OID] {
			return !missing[e.OID]
		}
		done[e.OID] = true
		for _, r := range e.Requires {
			if dep, ok := byOID[r]; ok && !visit(dep) {
				missing[e.OID] = true
			}
		}
		if !missing[e.OID] {
			out = append(out, e)
		}
		return !missing[e.OID]
	}
	for _, e := range all {
		visit(e)
	}
	return out
}

// withoutAdminExtensions takes the extensions the admin makes out of what a restore must leave
// out as uncreatable (the restore still leaves them out: leaveOut adds them back, carried).
func (p *parentPlan) withoutAdminExtensions() {
	made := map[uint32]bool{}
	for _, e := range p.AdminExtensions {
		made[e.OID] = true
	}
	p.Uncreatable = slices.DeleteFunc(p.Uncreatable, func(u uncreatable) bool {
		return u.Catalog == catalogExtension && made[u.OID]
	})
}

// Catalog OIDs of the archive entries a restore leaves out for the admin's extensions.
const (
	catalogExtension = 3079 // pg_catalog.pg_extension
	catalogNamespace = 2615 // pg_catalog.pg_namespace
)

// leaveOut is what a restore of this plan leaves out: the uncreatable objects (reported), and
// what the admin made before the restore (its extensions and their schemas) or copies after it
// (the rows of those extensions' configuration tables, which belong to the admin: a restore as
// the copy's owner may not write them), all carried.
func (p *parentPlan) leaveOut() []uncreatable {
	out := slices.Clone(p.Uncreatable)
	for _, e := range p.AdminExtensions {
		out = append(out, uncreatable{Catalog: catalogExtension, OID: e.OID, carried: true})
		if e.MakeSchema {
			out = append(out, uncreatable{Catalog: catalogNamespace, OID: e.SchemaOID, carried: true})
		}
		for _, c := range e.Config {
			out = append(out, uncreatable{OID: c.OID, rows: true, carried: true})
		}
	}
	return out
}

// adminMade reports the extensions the admin made: carried, but owned by the admin.
func (p *parentPlan) adminMade() []notCarried {
	var out []notCarried
	for _, e := range p.AdminExtensions {
		why := "it is not trusted: only a superuser may create it"
		if e.Required {
			why = "an extension only a superuser may create requires it"
		}
		out = append(out, notCarried{Object: "extension " + e.Name, Reason: fmt.Sprintf("made by the cluster's admin before the restore (%s), "+
			"and owned by the admin: the copy's owner cannot ALTER EXTENSION ... UPDATE or drop it", why)})
	}
	return out
}

// prepareFor returns the cluster.CreateOptions.Prepare of a copy by dump whose parent has
// extensions the admin makes (nil if none): in the new database, still the admin's, it makes
// their schemas, then the extensions at the parent's versions with the parent's comments, lets
// owner use their foreign-data wrappers (the finish then sets the parent's privileges on them),
// gives the schemas to owner and, for a copy with rows (withRows), copies the rows of their
// configuration tables from the parent: all in one transaction, before anyone but the admin may
// change the database, so that none of the extensions' code the admin runs meets anything
// another role made. A database prepared by an interrupted attempt (its first extension
// exists: the transaction committed) is left as it is.
func (p *parentPlan) prepareFor(owner string, withRows bool) func(context.Context, *cluster.Locked, *pgx.Conn) error {
	if len(p.AdminExtensions) == 0 {
		return nil
	}
	exts, parent := p.AdminExtensions, p.Database
	return func(ctx context.Context, l *cluster.Locked, conn *pgx.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = $1)`, exts[0].Name).Scan(&done); err != nil || done {
				return err
			}
			for _, stmt := range adminExtensionStatements(exts, owner) {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", stmt, err)
				}
			}
			if !withRows || !slices.ContainsFunc(exts, func(e adminExtension) bool { return len(e.Config) > 0 }) {
				return nil
			}
			src, err := l.Connect(ctx, parent)
			if err != nil {
				return err
			}
			defer src.Close(context.WithoutCancel(ctx))
			return copyConfigRows(ctx, src, conn, exts)
		})
	}
}

// adminExtensionStatements are prepareFor's statements.
func adminExtensionStatements(exts []adminExtension, owner string) []string {
	var stmts, schemas []string
	made := map[uint32]bool{}
	for _, e := range exts {
		if e.MakeSchema && !made[e.SchemaOID] {
			made[e.SchemaOID] = true
			stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+ident(e.Schema))
			schemas = append(schemas, "COMMENT ON SCHEMA "+ident(e.Schema)+" IS "+nullableLiteral(e.SchemaComment),
				"ALTER SCHEMA "+ident(e.Schema)+" OWNER TO "+ident(owner))
		}
	}
	for _, e := range exts {
		stmts = append(stmts, "CREATE EXTENSION IF NOT EXISTS "+ident(e.Name)+" WITH SCHEMA "+ident(e.Schema)+" VERSION "+quoteLiteral(e.Version),
			"COMMENT ON EXTENSION "+ident(e.Name)+" IS "+nullableLiteral(e.Comment))
		for _, w := range e.Wrappers {
			stmts = append(stmts, "GRANT USAGE ON FOREIGN DATA WRAPPER "+ident(w)+" TO "+ident(owner))
		}
	}
	return append(stmts, schemas...)
}

func nullableLiteral(s *string) string {
	if s == nil {
		return "NULL"
	}
	return quoteLiteral(*s)
}
