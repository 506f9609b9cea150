package workspace

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// aclItem is one exploded privilege (aclexplode): Privilege granted by Grantor to Grantee
// ("PUBLIC" for everyone).
type aclItem struct {
	Grantor, Grantee, Privilege string
	Grantable                   bool
}

// objectACL is the access list of one object (or of one column of a table) as
// pg_identify_object names it: the same key in the parent and in its fork.
type objectACL struct {
	Type     string // table, view, sequence, function, type, schema, large object, ...; "table column"
	Identity string // pg_identify_object's identity, quoted as SQL needs it (of the table, for a column)
	Column   string // quoted column name, for a column's own privileges
	Kind     string // acldefault's object kind ("" for a column: no default privileges)
	Owner    string
	Items    []aclItem // nil: every privilege revoked
}

func (o *objectACL) key() string { return o.Type + " " + o.Identity + " " + o.Column }

func (o *objectACL) String() string {
	if o.Column != "" {
		return "column " + o.Column + " of " + o.Identity
	}
	return o.Type + " " + o.Identity
}

// objectACLsSQL lists every object with an access list of its own (NULL is the built-in default,
// left out) and every column with privileges of its own. An extension's member is listed even
// with the built-in default (exploded from acldefault): a copy's finish maps its owner to the
// member's owner in the copy, which is not the copy's owner (finish.go, memberMapper).
const objectACLsSQL = `
WITH m AS (SELECT classid, objid FROM pg_catalog.pg_depend WHERE deptype = 'e'),
o (classid, objid, kind, owner, acl) AS (
    SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, oid, CASE relkind WHEN 'S' THEN 's' ELSE 'r' END, relowner, relacl
      FROM pg_catalog.pg_class WHERE oid >= 16384 AND relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
       AND (relacl IS NOT NULL OR (oid IN (SELECT objid FROM m WHERE classid = 'pg_catalog.pg_class'::pg_catalog.regclass)))
    UNION ALL SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, oid, 'f', proowner, proacl FROM pg_catalog.pg_proc
     WHERE oid >= 16384 AND (proacl IS NOT NULL OR oid IN (SELECT objid FROM m WHERE classid = 'pg_catalog.pg_proc'::pg_catalog.regclass))
    UNION ALL SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, oid, 'T', typowner, typacl FROM pg_catalog.pg_type
     WHERE typacl IS NOT NULL AND oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass, oid, 'n', nspowner, nspacl FROM pg_catalog.pg_namespace
     WHERE nspacl IS NOT NULL AND (oid >= 16384 OR nspname = 'public')
    UNION ALL SELECT 'pg_catalog.pg_largeobject'::pg_catalog.regclass, oid, 'L', lomowner, lomacl FROM pg_catalog.pg_largeobject_metadata
     WHERE lomacl IS NOT NULL
    UNION ALL SELECT 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass, oid, 'F', fdwowner, fdwacl
      FROM pg_catalog.pg_foreign_data_wrapper WHERE oid >= 16384
       AND (fdwacl IS NOT NULL OR oid IN (SELECT objid FROM m WHERE classid = 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass))
    UNION ALL SELECT 'pg_catalog.pg_foreign_server'::pg_catalog.regclass, oid, 'S', srvowner, srvacl FROM pg_catalog.pg_foreign_server
     WHERE srvacl IS NOT NULL AND oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_language'::pg_catalog.regclass, oid, 'l', lanowner, lanacl FROM pg_catalog.pg_language
     WHERE lanacl IS NOT NULL AND oid >= 16384
)
SELECT i.type, i.identity, '', o.kind::text, pg_catalog.pg_get_userbyid(o.owner),
       pg_catalog.pg_get_userbyid(a.grantor), CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
       a.privilege_type, a.is_grantable
  FROM o CROSS JOIN LATERAL pg_catalog.pg_identify_object(o.classid, o.objid, 0) i
  LEFT JOIN LATERAL pg_catalog.aclexplode(coalesce(o.acl, pg_catalog.acldefault(o.kind::"char", o.owner))) a ON true
UNION ALL
SELECT 'table column', t.identity, pg_catalog.quote_ident(att.attname), '', pg_catalog.pg_get_userbyid(c.relowner),
       pg_catalog.pg_get_userbyid(a.grantor), CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
       a.privilege_type, a.is_grantable
  FROM pg_catalog.pg_attribute att JOIN pg_catalog.pg_class c ON c.oid = att.attrelid
 CROSS JOIN LATERAL pg_catalog.pg_identify_object('pg_catalog.pg_class'::pg_catalog.regclass, c.oid, 0) t
  LEFT JOIN LATERAL pg_catalog.aclexplode(att.attacl) a ON true
 WHERE att.attacl IS NOT NULL AND att.attnum > 0 AND NOT att.attisdropped AND c.oid >= 16384`

// readObjectACLs reads every object and column access list of the connected database.
func readObjectACLs(ctx context.Context, q querier) (map[string]*objectACL, error) {
	rows, err := q.Query(ctx, objectACLsSQL)
	if err != nil {
		return nil, fmt.Errorf("access lists: %w", err)
	}
	defer rows.Close()
	out := map[string]*objectACL{}
	for rows.Next() {
		var o objectACL
		var grantor, grantee, priv *string
		var grantable *bool
		if err := rows.Scan(&o.Type, &o.Identity, &o.Column, &o.Kind, &o.Owner, &grantor, &grantee, &priv, &grantable); err != nil {
			return nil, fmt.Errorf("access lists: %w", err)
		}
		acl := out[o.key()]
		if acl == nil {
			acl = &o
			out[o.key()] = acl
		}
		if priv != nil {
			acl.Items = append(acl.Items, aclItem{Grantor: *grantor, Grantee: *grantee, Privilege: *priv, Grantable: *grantable})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("access lists: %w", err)
	}
	return out, nil
}

func (p *parentPlan) readObjectACLs(ctx context.Context, tx querier) error {
	acls, err := readObjectACLs(ctx, tx)
	p.ObjectACLs = acls
	return err
}

// defaultACL is one pg_default_acl entry: what objects Role creates (in Schema, "" for
// everywhere) of ObjType (r tables, S sequences, f functions, T types, n schemas) are granted.
type defaultACL struct {
	Role, Schema, ObjType string
	Items                 []aclItem
}

func (d defaultACL) key() string { return d.Role + " " + d.Schema + " " + d.ObjType }

// aclDefaultsSQL explodes acldefault(kind, role) for pairs ($1 kinds, $2 role names): the
// privileges an object has while its access list is NULL.
const aclDefaultsSQL = `
SELECT x.kind, x.role, pg_catalog.pg_get_userbyid(a.grantor),
       CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable
  FROM unnest($1::text[], $2::text[]) AS x(kind, role)
 CROSS JOIN LATERAL pg_catalog.aclexplode(pg_catalog.acldefault(x.kind::"char",
        (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = x.role))) a`

// aclDefaults are the built-in access lists of (kind, role) pairs, read from the server.
type aclDefaults map[[2]string][]aclItem

func readACLDefaults(ctx context.Context, q querier, pairs map[[2]string]bool) (aclDefaults, error) {
	out := aclDefaults{}
	if len(pairs) == 0 {
		return out, nil
	}
	var kinds, roles []string
	for p := range pairs {
		kinds, roles = append(kinds, p[0]), append(roles, p[1])
		out[p] = nil
	}
	rows, err := q.Query(ctx, aclDefaultsSQL, kinds, roles)
	if err != nil {
		return nil, fmt.Errorf("built-in privileges: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, role string
		var a aclItem
		if err := rows.Scan(&kind, &role, &a.Grantor, &a.Grantee, &a.Privilege, &a.Grantable); err != nil {
			return nil, fmt.Errorf("built-in privileges: %w", err)
		}
		out[[2]string{kind, role}] = append(out[[2]string{kind, role}], a)
	}
	return out, rows.Err()
}

const defaultACLsSQL = `
SELECT pg_catalog.pg_get_userbyid(d.defaclrole), coalesce(n.nspname, ''), d.defaclobjtype::text,
       pg_catalog.pg_get_userbyid(a.grantor), CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
       a.privilege_type, a.is_grantable
  FROM pg_catalog.pg_default_acl d LEFT JOIN pg_catalog.pg_namespace n ON n.oid = d.defaclnamespace
  LEFT JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) a ON true`

func readDefaultACLs(ctx context.Context, q querier) ([]defaultACL, error) {
	rows, err := q.Query(ctx, defaultACLsSQL)
	if err != nil {
		return nil, fmt.Errorf("default privileges: %w", err)
	}
	defer rows.Close()
	byKey := map[string]*defaultACL{}
	var order []string
	for rows.Next() {
		var d defaultACL
		var grantor, grantee, priv *string
		var grantable *bool
		if err := rows.Scan(&d.Role, &d.Schema, &d.ObjType, &grantor, &grantee, &priv, &grantable); err != nil {
			return nil, fmt.Errorf("default privileges: %w", err)
		}
		e := byKey[d.key()]
		if e == nil {
			e = &d
			byKey[d.key()] = e
			order = append(order, d.key())
		}
		if priv != nil {
			e.Items = append(e.Items, aclItem{Grantor: *grantor, Grantee: *grantee, Privilege: *priv, Grantable: *grantable})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("default privileges: %w", err)
	}
	out := make([]defaultACL, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, nil
}

func (p *parentPlan) readDefaultACLs(ctx context.Context, tx querier) error {
	d, err := readDefaultACLs(ctx, tx)
	p.DefaultACLs = d
	return err
}

// mapItems maps the roles of items and merges the grants the mapping made equal (the grant
// option kept if either had it), in a stable order.
func mapItems(items []aclItem, m func(string) string) []aclItem {
	type k struct{ grantor, grantee, priv string }
	merged := map[k]bool{}
	for _, a := range items {
		kk := k{m(a.Grantor), m(a.Grantee), a.Privilege}
		merged[kk] = merged[kk] || a.Grantable
	}
	out := make([]aclItem, 0, len(merged))
	for kk, g := range merged {
		out = append(out, aclItem{Grantor: kk.grantor, Grantee: kk.grantee, Privilege: kk.priv, Grantable: g})
	}
	sortItems(out)
	return out
}

func sortItems(items []aclItem) {
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.Grantor != b.Grantor {
			return a.Grantor < b.Grantor
		}
		if a.Grantee != b.Grantee {
			return a.Grantee < b.Grantee
		}
		return a.Privilege < b.Privilege
	})
}

// aclChange is what turns one access list into another: grants to add (or whose grant option
// to add) and grants to take away (or only their grant option).
type aclChange struct {
	grant, revoke []aclItem
	revokeOption  []aclItem // the privilege stays, its grant option goes
	grantOption   []aclItem // the privilege is there, its grant option is added
}

// diffItems computes the change from current to target (both merged, no duplicates).
func diffItems(current, target []aclItem) aclChange {
	type k struct{ grantor, grantee, priv string }
	cur := map[k]bool{}
	for _, a := range current {
		cur[k{a.Grantor, a.Grantee, a.Privilege}] = a.Grantable
	}
	tgt := map[k]bool{}
	for _, a := range target {
		tgt[k{a.Grantor, a.Grantee, a.Privilege}] = a.Grantable
	}
	var c aclChange
	for _, a := range target {
		g, ok := cur[k{a.Grantor, a.Grantee, a.Privilege}]
		switch {
		case !ok:
			c.grant = append(c.grant, a)
		case a.Grantable && !g:
			c.grantOption = append(c.grantOption, a)
		}
	}
	for _, a := range current {
		g, ok := tgt[k{a.Grantor, a.Grantee, a.Privilege}]
		switch {
		case !ok:
			c.revoke = append(c.revoke, a)
		case a.Grantable && !g:
			c.revokeOption = append(c.revokeOption, a)
		}
	}
	return c
}

func (c aclChange) empty() bool {
	return len(c.grant)+len(c.revoke)+len(c.revokeOption)+len(c.grantOption) == 0
}

// privileges is every privilege name aclexplode returns (PostgreSQL 15-18): only these are ever
// written into a GRANT or REVOKE.
var privileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER", "EXECUTE",
	"USAGE", "CREATE", "CONNECT", "TEMPORARY", "SET", "ALTER SYSTEM", "MAINTAIN"}

// grantKeyword is the object kind of GRANT ... ON <kind> for a pg_identify_object type ("" when
// privileges of that kind cannot be granted this way).
func grantKeyword(typ string) string {
	switch typ {
	case "table", "view", "materialized view", "foreign table", "table column":
		return "TABLE"
	case "sequence":
		return "SEQUENCE"
	case "function", "procedure", "aggregate":
		return "ROUTINE"
	case "type", "domain", "composite type":
		return "TYPE"
	case "schema":
		return "SCHEMA"
	case "large object":
		return "LARGE OBJECT"
	case "foreign-data wrapper":
		return "FOREIGN DATA WRAPPER"
	case "server":
		return "FOREIGN SERVER"
	case "language":
		return "LANGUAGE"
	}
	return ""
}

// statement is one SQL statement of a fork's finishing, run as Actor ("" for the admin itself),
// with what it carries for the report if it fails.
type statement struct {
	Actor, SQL, What string
}

// grantStatements are the GRANT and REVOKE statements that turn current into target on the
// object "ON <on>" (for a column: privilege (col) ON TABLE). Revokes of grants made by others go
// first, grants by the owner before grants by others (who may need the owner's grant option).
func grantStatements(on, column, owner, what string, c aclChange) ([]statement, error) {
	var out []statement
	priv := func(a aclItem) (string, error) {
		if !slices.Contains(privileges, a.Privilege) {
			return "", fmt.Errorf("%s: unknown privilege %q", what, a.Privilege)
		}
		if column != "" {
			return a.Privilege + " (" + column + ")", nil
		}
		return a.Privilege, nil
	}
	add := func(a aclItem, sql string) {
		out = append(out, statement{Actor: a.Grantor, SQL: sql,
			What: fmt.Sprintf("%s of %s to %s (granted by %s)", a.Privilege, what, a.Grantee, a.Grantor)})
	}
	for _, a := range byGrantor(c.revoke, owner, false) {
		p, err := priv(a)
		if err != nil {
			return nil, err
		}
		add(a, "REVOKE "+p+" ON "+on+" FROM "+grantee(a.Grantee)+" CASCADE")
	}
	for _, a := range byGrantor(c.revokeOption, owner, false) {
		p, err := priv(a)
		if err != nil {
			return nil, err
		}
		add(a, "REVOKE GRANT OPTION FOR "+p+" ON "+on+" FROM "+grantee(a.Grantee)+" CASCADE")
	}
	for _, a := range byGrantor(append(slices.Clone(c.grant), c.grantOption...), owner, true) {
		p, err := priv(a)
		if err != nil {
			return nil, err
		}
		sql := "GRANT " + p + " ON " + on + " TO " + grantee(a.Grantee)
		if a.Grantable {
			sql += " WITH GRANT OPTION"
		}
		add(a, sql)
	}
	return out, nil
}

// byGrantor orders items: those granted by owner first (ownerFirst) or last.
func byGrantor(items []aclItem, owner string, ownerFirst bool) []aclItem {
	var own, others []aclItem
	for _, a := range items {
		if a.Grantor == owner {
			own = append(own, a)
		} else {
			others = append(others, a)
		}
	}
	if ownerFirst {
		return append(own, others...)
	}
	return append(others, own...)
}

func grantee(role string) string {
	if role == "PUBLIC" {
		return "PUBLIC"
	}
	return ident(role)
}

// defaultKinds maps pg_default_acl object types to acldefault's kinds and to the words of
// ALTER DEFAULT PRIVILEGES.
var defaultKinds = map[string][2]string{
	"r": {"r", "TABLES"}, "S": {"s", "SEQUENCES"}, "f": {"f", "FUNCTIONS"}, "T": {"T", "TYPES"}, "n": {"n", "SCHEMAS"},
}

// defaultACLStatements are the ALTER DEFAULT PRIVILEGES statements that turn current into target
// for one (role, schema, object type). They are run as the admin, who must be a member of role.
func defaultACLStatements(d defaultACL, c aclChange) ([]statement, error) {
	kinds, ok := defaultKinds[d.ObjType]
	if !ok {
		return nil, fmt.Errorf("default privileges of %s: unknown object type %q", d.Role, d.ObjType)
	}
	prefix := "ALTER DEFAULT PRIVILEGES FOR ROLE " + ident(d.Role)
	what := "default privileges of " + d.Role + " on " + strings.ToLower(kinds[1])
	if d.Schema != "" {
		prefix += " IN SCHEMA " + ident(d.Schema)
		what += " in schema " + d.Schema
	}
	var out []statement
	for _, list := range []struct {
		items []aclItem
		form  string
	}{{c.revoke, "REVOKE %s ON %s FROM %s"}, {c.revokeOption, "REVOKE GRANT OPTION FOR %s ON %s FROM %s"},
		{c.grant, "GRANT %s ON %s TO %s"}, {c.grantOption, "GRANT %s ON %s TO %s"}} {
		for _, a := range list.items {
			if !slices.Contains(privileges, a.Privilege) {
				return nil, fmt.Errorf("%s: unknown privilege %q", what, a.Privilege)
			}
			sql := prefix + " " + fmt.Sprintf(list.form, a.Privilege, kinds[1], grantee(a.Grantee))
			if strings.HasPrefix(list.form, "GRANT") && a.Grantable {
				sql += " WITH GRANT OPTION"
			}
			out = append(out, statement{SQL: sql, What: fmt.Sprintf("%s: %s to %s", what, a.Privilege, a.Grantee)})
		}
	}
	return out, nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings is on in every
// supported server).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
