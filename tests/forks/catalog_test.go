package forks_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/testenv"
)

// The fidelity checker: what a fork must reproduce of its parent, read from the catalogs of
// both databases (as the cluster's superuser) and compared after the ownership mapping of
// ../shared/DESIGN.md, "Ownership in fork copies": every role that owns something in the parent
// (the database, any object, default privileges) is played in the fork by the fork's owner;
// every other role stays itself.

// catalog is what a database holds that a fork must reproduce, each part normalized to sorted
// lines so that two databases compare line by line.
type catalog struct {
	db           string
	schema       []string          // pg_dump --schema-only --no-owner --no-acl, without comments and blank lines
	owners       map[string]string // object ("type identity") -> owner
	memberOf     map[string]string // an extension's member (or a part of one: an array type) -> "extension name"
	ownerRoles   []string          // roles that own something here (the mapping's domain)
	acls         []aclItem         // object and column privileges
	defaultACLs  []aclItem         // pg_default_acl: object = "<role> <schema> <objtype>"
	settings     []string          // ALTER DATABASE ... SET
	roleSettings []string          // "<role> <setting>": ALTER ROLE ... IN DATABASE ... SET
	databaseACL  []aclItem         // the database's own ACL
	properties   string            // encoding, locale, connection limit
	sequences    map[string]string // sequence -> last value ("" when never called)
	populated    map[string]bool   // materialized view -> populated
	rows         map[string]string // table -> md5 of its rows, in text order
	largeObjects map[string]string // large object oid -> md5 of its data
}

// aclItem is one exploded privilege: on object, granted by grantor to grantee ("PUBLIC").
type aclItem struct {
	object, grantor, grantee, privilege string
	grantable                           bool
}

func (a aclItem) String() string {
	g := ""
	if a.grantable {
		g = " WITH GRANT OPTION"
	}
	return fmt.Sprintf("%s: %s to %s by %s%s", a.object, a.privilege, a.grantee, a.grantor, g)
}

// userObjects lists the objects of a database that have an owner, with a stable name
// ("type identity"), their owner, and whether they belong to another object (an extension's
// members, array types, a range type's constructors: pg_depend deptype e or i), whose owners
// are not owner roles of the database. Toast tables and their indexes are left out (their names carry OIDs).
const userObjectsSQL = `
WITH o (classid, objid, owner) AS (
    SELECT 'pg_class'::regclass, oid, relowner FROM pg_class WHERE oid >= 16384 AND relnamespace <> 'pg_toast'::regnamespace
    UNION ALL SELECT 'pg_proc'::regclass, oid, proowner FROM pg_proc WHERE oid >= 16384
    UNION ALL SELECT 'pg_type'::regclass, oid, typowner FROM pg_type WHERE oid >= 16384
              AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = typrelid AND c.relkind = 't')
    UNION ALL SELECT 'pg_namespace'::regclass, oid, nspowner FROM pg_namespace WHERE oid >= 16384 OR nspname = 'public'
    UNION ALL SELECT 'pg_collation'::regclass, oid, collowner FROM pg_collation WHERE oid >= 16384
    UNION ALL SELECT 'pg_conversion'::regclass, oid, conowner FROM pg_conversion WHERE oid >= 16384
    UNION ALL SELECT 'pg_operator'::regclass, oid, oprowner FROM pg_operator WHERE oid >= 16384
    UNION ALL SELECT 'pg_opclass'::regclass, oid, opcowner FROM pg_opclass WHERE oid >= 16384
    UNION ALL SELECT 'pg_opfamily'::regclass, oid, opfowner FROM pg_opfamily WHERE oid >= 16384
    UNION ALL SELECT 'pg_ts_config'::regclass, oid, cfgowner FROM pg_ts_config WHERE oid >= 16384
    UNION ALL SELECT 'pg_ts_dict'::regclass, oid, dictowner FROM pg_ts_dict WHERE oid >= 16384
    UNION ALL SELECT 'pg_foreign_data_wrapper'::regclass, oid, fdwowner FROM pg_foreign_data_wrapper WHERE oid >= 16384
    UNION ALL SELECT 'pg_foreign_server'::regclass, oid, srvowner FROM pg_foreign_server WHERE oid >= 16384
    UNION ALL SELECT 'pg_event_trigger'::regclass, oid, evtowner FROM pg_event_trigger WHERE oid >= 16384
    UNION ALL SELECT 'pg_publication'::regclass, oid, pubowner FROM pg_publication WHERE oid >= 16384
    UNION ALL SELECT 'pg_largeobject'::regclass, oid, lomowner FROM pg_largeobject_metadata
    UNION ALL SELECT 'pg_statistic_ext'::regclass, oid, stxowner FROM pg_statistic_ext WHERE oid >= 16384
    UNION ALL SELECT 'pg_language'::regclass, oid, lanowner FROM pg_language WHERE oid >= 16384
    UNION ALL SELECT 'pg_extension'::regclass, oid, extowner FROM pg_extension WHERE oid >= 16384
)
SELECT i.type || ' ' || i.identity, pg_get_userbyid(o.owner),
       EXISTS (SELECT FROM pg_depend d WHERE d.classid = o.classid AND d.objid = o.objid AND d.deptype IN ('e', 'i')),
       coalesce((SELECT 'extension ' || quote_ident(x.extname) FROM pg_depend d JOIN pg_extension x ON x.oid = d.refobjid
                  WHERE d.classid = o.classid AND d.objid = o.objid AND d.deptype = 'e'
                    AND d.refclassid = 'pg_extension'::regclass),
                (SELECT 'extension ' || quote_ident(x.extname) FROM pg_depend di
                   JOIN pg_depend de ON de.classid = di.refclassid AND de.objid = di.refobjid AND de.deptype = 'e'
                                    AND de.refclassid = 'pg_extension'::regclass
                   JOIN pg_extension x ON x.oid = de.refobjid
                  WHERE di.classid = o.classid AND di.objid = o.objid AND di.deptype = 'i'), '')
  FROM o, pg_identify_object(o.classid, o.objid, 0) i`

// aclsSQL explodes the privileges of every user object (NULL ACLs as the built-in default) and
// of every column that has privileges of its own.
const aclsSQL = `
WITH o (classid, objid, kind, owner, acl) AS (
    SELECT 'pg_class'::regclass, oid, CASE relkind WHEN 'S' THEN 's' ELSE 'r' END, relowner, relacl
      FROM pg_class WHERE oid >= 16384 AND relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
    UNION ALL SELECT 'pg_proc'::regclass, oid, 'f', proowner, proacl FROM pg_proc WHERE oid >= 16384
    UNION ALL SELECT 'pg_type'::regclass, oid, 'T', typowner, typacl FROM pg_type WHERE oid >= 16384
              AND typelem = 0 AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = typrelid AND c.relkind <> 'c')
    UNION ALL SELECT 'pg_namespace'::regclass, oid, 'n', nspowner, nspacl FROM pg_namespace WHERE oid >= 16384 OR nspname = 'public'
    UNION ALL SELECT 'pg_largeobject'::regclass, oid, 'L', lomowner, lomacl FROM pg_largeobject_metadata
    UNION ALL SELECT 'pg_foreign_data_wrapper'::regclass, oid, 'F', fdwowner, fdwacl FROM pg_foreign_data_wrapper WHERE oid >= 16384
    UNION ALL SELECT 'pg_foreign_server'::regclass, oid, 'S', srvowner, srvacl FROM pg_foreign_server WHERE oid >= 16384
    UNION ALL SELECT 'pg_language'::regclass, oid, 'l', lanowner, lanacl FROM pg_language WHERE oid >= 16384
)
SELECT i.type || ' ' || i.identity, pg_get_userbyid(a.grantor),
       CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable
  FROM o, pg_identify_object(o.classid, o.objid, 0) i, aclexplode(coalesce(o.acl, acldefault(o.kind::"char", o.owner))) a
UNION ALL
SELECT 'column ' || i.identity, pg_get_userbyid(a.grantor),
       CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable
  FROM pg_attribute att, pg_identify_object('pg_class'::regclass, att.attrelid, att.attnum) i, aclexplode(att.attacl) a
 WHERE att.attrelid >= 16384 AND att.attnum > 0 AND att.attacl IS NOT NULL`

const defaultACLsSQL = `
SELECT pg_get_userbyid(d.defaclrole), coalesce(n.nspname, '-'), d.defaclobjtype::text, pg_get_userbyid(a.grantor),
       CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable
  FROM pg_default_acl d LEFT JOIN pg_namespace n ON n.oid = d.defaclnamespace, aclexplode(d.defaclacl) a`

const databaseSQL = `
SELECT pg_get_userbyid(d.datdba),
       format('encoding %s, collate %s, ctype %s, provider %s, icu %s, connection limit %s',
              pg_encoding_to_char(d.encoding), d.datcollate, d.datctype, d.datlocprovider, coalesce(to_jsonb(d) ->> 'datlocale', to_jsonb(d) ->> 'daticulocale', '-'), d.datconnlimit)
  FROM pg_database d WHERE d.datname = current_database()`

const databaseACLSQL = `
SELECT pg_get_userbyid(a.grantor), CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type, a.is_grantable
  FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a WHERE d.datname = current_database()`

const settingsSQL = `
SELECT CASE s.setrole WHEN 0 THEN '' ELSE pg_get_userbyid(s.setrole) END, c
  FROM pg_db_role_setting s, unnest(s.setconfig) c
 WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`

// readCatalog reads db of the external cluster as its superuser. withData adds rows, sequence
// positions and large objects.
func readCatalog(t *testing.T, db string) catalog {
	t.Helper()
	ctx := context.Background()
	conn := external.Connect(t, db)
	defer conn.Close(ctx)
	c := catalog{db: db, owners: map[string]string{}, memberOf: map[string]string{}, sequences: map[string]string{}, populated: map[string]bool{},
		rows: map[string]string{}, largeObjects: map[string]string{}}
	c.schema = schemaDump(t, db)

	roles := map[string]bool{}
	eachRow(t, conn, userObjectsSQL, func(r pgx.Rows) error {
		var obj, owner, ext string
		var member bool
		if err := r.Scan(&obj, &owner, &member, &ext); err != nil {
			return err
		}
		c.owners[obj] = owner
		if ext != "" {
			c.memberOf[obj] = ext
		}
		if !member {
			roles[owner] = true
		}
		return nil
	})
	eachRow(t, conn, aclsSQL, func(r pgx.Rows) error {
		var a aclItem
		err := r.Scan(&a.object, &a.grantor, &a.grantee, &a.privilege, &a.grantable)
		c.acls = append(c.acls, a)
		return err
	})
	eachRow(t, conn, defaultACLsSQL, func(r pgx.Rows) error {
		var role, schema, objtype string
		var a aclItem
		if err := r.Scan(&role, &schema, &objtype, &a.grantor, &a.grantee, &a.privilege, &a.grantable); err != nil {
			return err
		}
		roles[role] = true
		a.object = role + " " + schema + " " + objtype
		c.defaultACLs = append(c.defaultACLs, a)
		return nil
	})
	var dba string
	if err := conn.QueryRow(ctx, databaseSQL).Scan(&dba, &c.properties); err != nil {
		t.Fatalf("read database %s: %v", db, err)
	}
	roles[dba] = true
	c.owners["database"] = dba
	eachRow(t, conn, databaseACLSQL, func(r pgx.Rows) error {
		a := aclItem{object: "database"}
		err := r.Scan(&a.grantor, &a.grantee, &a.privilege, &a.grantable)
		c.databaseACL = append(c.databaseACL, a)
		return err
	})
	eachRow(t, conn, settingsSQL, func(r pgx.Rows) error {
		var role, setting string
		if err := r.Scan(&role, &setting); err != nil {
			return err
		}
		if role == "" {
			c.settings = append(c.settings, setting)
		} else {
			c.roleSettings = append(c.roleSettings, role+" "+setting)
		}
		return nil
	})
	delete(roles, "pg_database_owner")
	for r := range roles {
		c.ownerRoles = append(c.ownerRoles, r)
	}
	sort.Strings(c.ownerRoles)
	sort.Strings(c.settings)
	readData(t, conn, &c)
	return c
}

// readData reads sequence positions, the populated state of materialized views, a checksum of
// every table's rows and of every large object.
func readData(t *testing.T, conn *pgx.Conn, c *catalog) {
	t.Helper()
	eachRow(t, conn, `SELECT format('%I.%I', schemaname, sequencename), coalesce(last_value::text, '') FROM pg_sequences
		WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`, func(r pgx.Rows) error {
		var s, v string
		err := r.Scan(&s, &v)
		c.sequences[s] = v
		return err
	})
	eachRow(t, conn, `SELECT format('%I.%I', schemaname, matviewname), ispopulated FROM pg_matviews`, func(r pgx.Rows) error {
		var m string
		var p bool
		err := r.Scan(&m, &p)
		c.populated[m] = p
		return err
	})
	var tables []string
	eachRow(t, conn, `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'm') AND c.oid >= 16384 AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
		  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
		  AND (c.relkind = 'r' OR c.relispopulated)`, func(r pgx.Rows) error {
		var s string
		err := r.Scan(&s)
		tables = append(tables, s)
		return err
	})
	for _, tbl := range tables {
		c.rows[tbl] = queryString(t, conn, `SELECT md5(coalesce(string_agg(x::text, E'\n' ORDER BY x::text), '')) FROM `+tbl+` x`)
	}
	eachRow(t, conn, `SELECT oid::text, md5(lo_get(oid)) FROM pg_largeobject_metadata`, func(r pgx.Rows) error {
		var o, sum string
		err := r.Scan(&o, &sum)
		c.largeObjects[o] = sum
		return err
	})
}

func eachRow(t *testing.T, conn *pgx.Conn, sql string, fn func(pgx.Rows) error) {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", firstLineOf(sql), err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			t.Fatalf("%s: %v", firstLineOf(sql), err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", firstLineOf(sql), err)
	}
}

func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// pgDumpFor is the pg_dump of the version the tests run the external cluster on
// ($DATAENV_TEST_PG_VERSION: the tools of its root), else the one on PATH: pg_dump refuses a
// newer server.
func pgDumpFor(t *testing.T) string {
	t.Helper()
	v, err := testenv.RequestedPGVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v == 0 {
		return "pg_dump"
	}
	srv, err := testenv.FindPGServer(v)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(srv.ToolDir, "pg_dump")
}

// schemaDump is pg_dump --schema-only --no-owner --no-acl of db (owners and privileges are
// compared from the catalogs, with the ownership mapping), without comment lines, psql's
// \restrict lines and blank lines.
func schemaDump(t *testing.T, db string) []string {
	t.Helper()
	cmd := exec.Command(pgDumpFor(t), "--schema-only", "--no-owner", "--no-acl", "--no-password")
	cmd.Env = append(os.Environ(), "PGHOST="+external.Host(), "PGPORT="+strconv.Itoa(external.Port()),
		"PGUSER="+external.SuperUser, "PGPASSWORD="+external.SuperPassword, "PGDATABASE="+db, "PGSSLMODE=disable")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("pg_dump %s: %v %s", db, err, msg)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l == "" || strings.HasPrefix(l, "--") || strings.HasPrefix(l, `\restrict`) || strings.HasPrefix(l, `\unrestrict`) {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// dumpAs dumps db whole (schema, rows, large objects) as user, as one of its members would, and
// says why it could not. Row-level security applies (a forced policy binds the owner too).
func dumpAs(t *testing.T, user, password, db string) error {
	t.Helper()
	cmd := exec.Command(pgDumpFor(t), "--enable-row-security", "--no-password", "--file", os.DevNull)
	cmd.Env = append(os.Environ(), "PGHOST="+external.Host(), "PGPORT="+strconv.Itoa(external.Port()),
		"PGUSER="+user, "PGPASSWORD="+password, "PGDATABASE="+db, "PGSSLMODE=disable")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_dump %s as %s: %w: %s", db, user, err, out)
	}
	return nil
}

// expectation says what a fork of a given mode must hold, and which differences its request
// reported (so they are not failures).
type expectation struct {
	owner     string // the fork's owner role: every owner role of the parent maps to it
	withData  bool   // full_copy: rows, matview contents and large objects too
	skipRows  []string
	notCopied []string // objects (as the checker names them) the request reported it could not carry
}

// compareFork returns every difference between parent and fork that the mode and the mapping do
// not explain, one line each.
func compareFork(parent, fork catalog, exp expectation) []string {
	mapped := map[string]bool{}
	for _, r := range parent.ownerRoles {
		mapped[r] = true
	}
	m := func(role string) string {
		if mapped[role] {
			return exp.owner
		}
		return role
	}
	skip := func(obj string) bool {
		for _, s := range exp.notCopied {
			if obj == s || strings.HasPrefix(obj, s+".") || strings.HasPrefix(obj, s+" ") {
				return true
			}
		}
		return !exp.withData && strings.HasPrefix(obj, "large object ")
	}
	var diffs []string
	diffs = append(diffs, diffSchema(parent.schema, fork.schema)...)
	diffs = append(diffs, diffOwners(parent.owners, fork.owners, objectMapper(parent, fork, m), skip)...)
	diffs = append(diffs, diffLines("privilege", mapACL(mapObjectACL(parent, fork, m), nil, skip), mapACL(fork.acls, nil, skip))...)
	diffs = append(diffs, diffLines("default privilege", mapDefaultACL(parent.defaultACLs, m), mapDefaultACL(fork.defaultACLs, nil))...)
	diffs = append(diffs, diffLines("database privilege", mapACL(parent.databaseACL, m, skip), mapACL(fork.databaseACL, nil, skip))...)
	diffs = append(diffs, diffLines("database setting", parent.settings, fork.settings)...)
	diffs = append(diffs, diffLines("role setting", mapRoleSettings(parent.roleSettings, m), mapRoleSettings(fork.roleSettings, nil))...)
	if parent.properties != fork.properties {
		diffs = append(diffs, fmt.Sprintf("database properties: parent %q, fork %q", parent.properties, fork.properties))
	}
	diffs = append(diffs, diffMap("sequence position", parent.sequences, fork.sequences, skip)...)
	diffs = append(diffs, diffData(parent, fork, exp, skip)...)
	return diffs
}

// diffData: full_copy has every row, populated materialized view and large object of the parent;
// schema_only has no rows, no large objects and its materialized views are unpopulated.
func diffData(parent, fork catalog, exp expectation, skip func(string) bool) []string {
	var diffs []string
	if exp.withData {
		rows := maps2(parent.rows, exp.skipRows)
		diffs = append(diffs, diffMap("rows of", rows, maps2(fork.rows, exp.skipRows), skip)...)
		diffs = append(diffs, diffMap("large object", parent.largeObjects, fork.largeObjects, skip)...)
		for mv, p := range parent.populated {
			if fork.populated[mv] != p {
				diffs = append(diffs, fmt.Sprintf("materialized view %s: populated %v in the parent, %v in the fork", mv, p, fork.populated[mv]))
			}
		}
		return diffs
	}
	const empty = "d41d8cd98f00b204e9800998ecf8427e" // md5 of ""
	for tbl, sum := range fork.rows {
		if sum != empty {
			diffs = append(diffs, "rows of "+tbl+": the schema_only fork has rows")
		}
	}
	for lo := range fork.largeObjects {
		diffs = append(diffs, "large object "+lo+": in the schema_only fork")
	}
	for mv, p := range fork.populated {
		if p {
			diffs = append(diffs, "materialized view "+mv+": populated in the schema_only fork")
		}
	}
	return diffs
}

func maps2(m map[string]string, without []string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !slices.Contains(without, k) {
			out[k] = v
		}
	}
	return out
}

// objectMapper maps the roles of an object from the parent to the fork: an extension's member
// belongs to its extension's owner, whoever that is in the fork (the extension keeps its owner
// in a TEMPLATE copy, and one the cluster's admin made belongs to the admin; the request reports
// both), so the parent's owner of the member maps to the fork's; every other role is mapped by m.
func objectMapper(parent, fork catalog, m func(string) string) func(obj, role string) string {
	return func(obj, role string) string {
		ext := parent.memberOf[obj]
		if ext == "" && strings.HasSuffix(obj, "[]") { // an array type belongs to its element's extension
			ext = parent.memberOf[strings.TrimSuffix(obj, "[]")]
		}
		if ext != "" && role == parent.owners[ext] && fork.owners[ext] != "" {
			return fork.owners[ext]
		}
		return m(role)
	}
}

// mapObjectACL is the parent's privileges with their roles mapped to the fork (objectMapper).
func mapObjectACL(parent, fork catalog, m func(string) string) []aclItem {
	om := objectMapper(parent, fork, m)
	out := make([]aclItem, len(parent.acls))
	for i, a := range parent.acls {
		a.grantor, a.grantee = om(a.object, a.grantor), om(a.object, a.grantee)
		out[i] = a
	}
	return out
}

func diffOwners(parent, fork map[string]string, m func(obj, role string) string, skip func(string) bool) []string {
	var diffs []string
	for obj, owner := range parent {
		if skip(obj) {
			continue
		}
		got, ok := fork[obj]
		switch {
		case !ok:
			diffs = append(diffs, "owner: "+obj+" is missing in the fork")
		case got != m(obj, owner):
			diffs = append(diffs, fmt.Sprintf("owner: %s is owned by %s in the fork, want %s (parent owner %s)", obj, got, m(obj, owner), owner))
		}
	}
	for obj := range fork {
		if _, ok := parent[obj]; !ok {
			diffs = append(diffs, "owner: "+obj+" is in the fork only")
		}
	}
	sort.Strings(diffs)
	return diffs
}

// mapACL maps the roles of a set of privileges and merges what the mapping made equal (two
// grants that became one, the grant option kept if either had it).
func mapACL(items []aclItem, m func(string) string, skip func(string) bool) []string {
	if m == nil {
		m = func(s string) string { return s }
	}
	merged := map[aclItem]bool{}
	for _, a := range items {
		if skip(a.object) {
			continue
		}
		k := aclItem{object: a.object, grantor: m(a.grantor), grantee: m(a.grantee), privilege: a.privilege}
		merged[k] = merged[k] || a.grantable
	}
	out := make([]string, 0, len(merged))
	for k, g := range merged {
		k.grantable = g
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}

// mapDefaultACL maps the role a default ACL belongs to (its first word) and its items.
func mapDefaultACL(items []aclItem, m func(string) string) []string {
	if m == nil {
		m = func(s string) string { return s }
	}
	mapped := make([]aclItem, len(items))
	for i, a := range items {
		role, rest, _ := strings.Cut(a.object, " ")
		a.object = m(role) + " " + rest
		mapped[i] = a
	}
	return mapACL(mapped, m, func(string) bool { return false })
}

func mapRoleSettings(lines []string, m func(string) string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		role, setting, _ := strings.Cut(l, " ")
		if m != nil {
			role = m(role)
		}
		out = append(out, role+" "+setting)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func diffMap(what string, parent, fork map[string]string, skip func(string) bool) []string {
	var diffs []string
	for k, v := range parent {
		if skip(k) {
			continue
		}
		if got, ok := fork[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s %s: missing in the fork", what, k))
		} else if got != v {
			diffs = append(diffs, fmt.Sprintf("%s %s: %q in the parent, %q in the fork", what, k, v, got))
		}
	}
	for k := range fork {
		if _, ok := parent[k]; !ok && !skip(k) {
			diffs = append(diffs, fmt.Sprintf("%s %s: in the fork only", what, k))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// diffSchema compares two schema dumps: the statements that differ, or that the same statements
// come in another order.
func diffSchema(parent, fork []string) []string {
	if slices.Equal(parent, fork) {
		return nil
	}
	if d := diffLines("schema", parent, fork); len(d) > 0 {
		return d
	}
	return []string{"schema: the same statements in another order"}
}

// diffLines compares two sorted-or-ordered line lists as multisets: lines only in the parent
// are missing from the fork, lines only in the fork are extra.
func diffLines(what string, parent, fork []string) []string {
	count := map[string]int{}
	for _, l := range parent {
		count[l]++
	}
	for _, l := range fork {
		count[l]--
	}
	var diffs []string
	for l, n := range count {
		switch {
		case n > 0:
			diffs = append(diffs, fmt.Sprintf("%s missing in the fork: %s", what, l))
		case n < 0:
			diffs = append(diffs, fmt.Sprintf("%s only in the fork: %s", what, l))
		}
	}
	sort.Strings(diffs)
	return diffs
}
