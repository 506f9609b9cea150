package workspace

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
)

// parentPlan is what a fork must reproduce of its parent database, read from the parent's
// catalogs as the cluster's admin before the copy is made (docs/forks.md, "What a fork keeps").
// Whatever the copy method, the fork is then brought to it: owners mapped, privileges, default
// privileges, settings, the database's access list, sequence positions.
type parentPlan struct {
	Database  string
	Owner     string // datdba
	Locale    cluster.Locale
	ConnLimit int
	// ACL of the database itself (NULL as the built-in default).
	DatabaseACL []aclItem
	Settings    []string      // ALTER DATABASE ... SET: "name=value"
	RoleSett    []roleSetting // ALTER ROLE ... IN DATABASE ... SET
	// OwnerRoles are the roles the fork's owner plays: the database's owner, every owner of an
	// object that is not part of another (an extension's members, array types, ...), every role
	// with default privileges here.
	OwnerRoles []ownerRole
	// OtherSessions counts the sessions connected to the parent besides the plan's own (and
	// autovacuum, which CREATE DATABASE ends itself): a TEMPLATE copy needs none.
	OtherSessions int
	// EventTriggers counts the enabled event triggers: DDL the admin runs in a TEMPLATE copy
	// would fire them, so a parent that has any is copied by dump and restore.
	EventTriggers int
	ObjectACLs    map[string]*objectACL // key: objectACL.key()
	DefaultACLs   []defaultACL
	Sequences     []sequencePosition // positions the admin may read (schema_only keeps them)
	Populated     []string           // populated materialized views
	// NoRows are tables whose rows a dump by the admin cannot read in full (forced row-level
	// security without BYPASSRLS); a full_copy by dump leaves their rows out (NoRowsPatterns,
	// for pg_dump --exclude-table-data) and says so.
	NoRows         []notCarried
	NoRowsPatterns []string
	// SequencesLeft are sequences whose position the admin may not read.
	SequencesLeft []notCarried
	// Uncreatable are objects the fork's owner may not create (superuser-only kinds): a restore
	// leaves them out and the result says so.
	Uncreatable []uncreatable
	// AdminExtensions are the extensions the admin makes in a copy by dump before its restore
	// (adminext.go), in the order they are made; they are not among Uncreatable.
	AdminExtensions []adminExtension
	// Unreadable are tables the admin may not read at all: pg_dump cannot dump the database.
	Unreadable []string
	// Fingerprint changes whenever the parent's schema does (schema templates).
	Fingerprint string
	// WorkspaceRolesLeft are other workspaces' roles whose grants a copy does not carry
	// (withoutWorkspaceRoles).
	WorkspaceRolesLeft []notCarried

	adminSuper, adminBypass bool
	serverNum               int
}

type roleSetting struct{ Role, Setting string }

// ownerRole is a role that owns something in the parent; CanAct: the admin may act as it (SET
// ROLE and its privileges), which mapping a TEMPLATE copy's objects away from it needs.
type ownerRole struct {
	Name          string
	Super, CanAct bool
}

type sequencePosition struct {
	Schema, Name string
	LastValue    int64
}

// uncreatable is an object a restore by a non-superuser leaves out: its catalog and OID (as
// pg_restore -l lists them), what it is and why.
type uncreatable struct {
	Catalog, OID uint32
	notCarried
	// carried: left out of the restore because the admin made it beforehand (not reported).
	carried bool
	// rows: the entries that load the rows of relation OID (TABLE DATA, SEQUENCE SET), which
	// the archive lists with catalog 0.
	rows bool
}

// notCarried is one thing a fork does not have of its parent, and why (the request's result
// lists them).
type notCarried struct {
	Object string `json:"object"`
	Reason string `json:"reason"`
}

// Queries of the parent. The search_path of every admin connection is pg_catalog, pg_temp, and
// nothing here runs code a role of the parent could have written: catalogs and built-in
// functions only.
const (
	parentDatabaseSQL = `
SELECT pg_catalog.pg_get_userbyid(d.datdba), pg_catalog.pg_encoding_to_char(d.encoding), d.datcollate, d.datctype,
       d.datlocprovider::text, coalesce(pg_catalog.to_jsonb(d) ->> 'datlocale', pg_catalog.to_jsonb(d) ->> 'daticulocale', ''),
       d.datconnlimit, r.rolsuper, r.rolsuper OR r.rolbypassrls, pg_catalog.current_setting('server_version_num')::int
  FROM pg_catalog.pg_database d, pg_catalog.pg_roles r
 WHERE d.datname = pg_catalog.current_database() AND r.rolname = current_user`

	// databaseACLSQL explodes the ACL of database $1 (NULL as the built-in default).
	databaseACLSQL = `
SELECT pg_catalog.pg_get_userbyid(a.grantor), CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee) END,
       a.privilege_type, a.is_grantable
  FROM pg_catalog.pg_database d, pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) a
 WHERE d.datname = $1`

	// settingsSQL lists ALTER DATABASE / ALTER ROLE ... IN DATABASE settings of database $1.
	settingsSQL = `
SELECT CASE s.setrole WHEN 0 THEN '' ELSE pg_catalog.pg_get_userbyid(s.setrole) END, c
  FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
 WHERE s.setdatabase = (SELECT oid FROM pg_catalog.pg_database WHERE datname = $1)
 ORDER BY 1, 2`

	// ownerRolesSQL: the database's owner, the owners of independent objects (pg_shdepend has
	// every owner but the bootstrap superuser, whose objects are looked for in the catalogs), and
	// the roles of default privileges. pg_database_owner is left out: it is whoever owns the fork.
	ownerRolesSQL = `
WITH db AS (SELECT oid, datdba FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()),
owners AS (
    SELECT s.refobjid AS role FROM pg_catalog.pg_shdepend s, db
     WHERE s.dbid = db.oid AND s.deptype = 'o' AND s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = s.classid AND d.objid = s.objid AND d.deptype IN ('e', 'i'))
    UNION SELECT datdba FROM db
    UNION SELECT 10 WHERE EXISTS (SELECT FROM (` + bootstrapOwnedSQL + `) b)
)
SELECT r.rolname, r.rolsuper,
       pg_catalog.pg_has_role(r.oid, 'USAGE') AND
       CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 160000 THEN pg_catalog.pg_has_role(r.oid, 'SET')
            ELSE pg_catalog.pg_has_role(r.oid, 'MEMBER') END
  FROM owners o JOIN pg_catalog.pg_roles r ON r.oid = o.role
 WHERE r.rolname <> 'pg_database_owner'
 ORDER BY 1`

	// bootstrapOwnedSQL finds user objects of the bootstrap superuser (OID 10) that belong to no
	// other object (as reownSQL tells them): pg_shdepend records no owner of a pinned role, so
	// these are looked for in the catalogs themselves.
	bootstrapOwnedSQL = `
SELECT o.classid, o.objid FROM (
    SELECT 'pg_catalog.pg_class'::pg_catalog.regclass AS classid, oid AS objid, relowner AS owner FROM pg_catalog.pg_class
     WHERE oid >= 16384 AND relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'c')
    UNION ALL SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, oid, proowner FROM pg_catalog.pg_proc WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, oid, typowner FROM pg_catalog.pg_type WHERE oid >= 16384 AND typrelid = 0
    UNION ALL SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass, oid, nspowner FROM pg_catalog.pg_namespace WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_publication'::pg_catalog.regclass, oid, pubowner FROM pg_catalog.pg_publication
    UNION ALL SELECT 'pg_catalog.pg_event_trigger'::pg_catalog.regclass, oid, evtowner FROM pg_catalog.pg_event_trigger
    UNION ALL SELECT 'pg_catalog.pg_largeobject'::pg_catalog.regclass, oid, lomowner FROM pg_catalog.pg_largeobject_metadata
    UNION ALL SELECT 'pg_catalog.pg_extension'::pg_catalog.regclass, oid, extowner FROM pg_catalog.pg_extension WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_collation'::pg_catalog.regclass, oid, collowner FROM pg_catalog.pg_collation WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass, oid, oprowner FROM pg_catalog.pg_operator WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_opclass'::pg_catalog.regclass, oid, opcowner FROM pg_catalog.pg_opclass WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_opfamily'::pg_catalog.regclass, oid, opfowner FROM pg_catalog.pg_opfamily WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_ts_config'::pg_catalog.regclass, oid, cfgowner FROM pg_catalog.pg_ts_config WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_ts_dict'::pg_catalog.regclass, oid, dictowner FROM pg_catalog.pg_ts_dict WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass, oid, stxowner FROM pg_catalog.pg_statistic_ext WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass, oid, fdwowner FROM pg_catalog.pg_foreign_data_wrapper WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_foreign_server'::pg_catalog.regclass, oid, srvowner FROM pg_catalog.pg_foreign_server WHERE oid >= 16384
    UNION ALL SELECT 'pg_catalog.pg_language'::pg_catalog.regclass, oid, lanowner FROM pg_catalog.pg_language WHERE oid >= 16384
) o
 WHERE o.owner = 10 AND ` + independentSQL

	// independentSQL: object o (o.classid, o.objid) belongs to no other object, neither as an
	// extension's member nor as a part (pg_depend deptype e or i). A partitioned table's
	// dependency on itself does not count, nor does a multirange type's on its range type (ALTER
	// TYPE of the range does not change the multirange's owner on PostgreSQL 15).
	independentSQL = `NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = o.classid AND d.objid = o.objid AND d.deptype IN ('e', 'i')
                      AND NOT (d.refclassid = d.classid AND d.refobjid = d.objid)
                      AND NOT (o.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND EXISTS (
                               SELECT FROM pg_catalog.pg_type t WHERE t.oid = o.objid AND t.typtype = 'm')))`

	// untrustedExtensionSQL: extension x, not one of template0's, is not trusted at its version
	// on this server: only a superuser may create it.
	untrustedExtensionSQL = `x.oid >= 16384 AND NOT EXISTS (SELECT FROM pg_catalog.pg_available_extension_versions v
                                      WHERE v.name = x.extname AND v.version = x.extversion AND v.trusted)`

	eventTriggersSQL = `SELECT count(*) FROM pg_catalog.pg_event_trigger WHERE evtenabled <> 'D'`

	// dataenv's own sessions (named by sidecar/internal/fence) are left out: they are short, or
	// exiting after their client closed them (a backend outlives its Close for a moment), and a
	// TEMPLATE copy that still meets one falls back to dump and restore (templateRefused). So are
	// server processes without a role (autovacuum workers, which CREATE DATABASE ends itself).
	// Both are told by what every role may read of pg_stat_activity: an admin without
	// pg_read_all_stats sees no backend_type of another role's session, and a filter on it left
	// every such session out, so the copy tried TEMPLATE and CREATE DATABASE waited 5 seconds
	// for them before it refused.
	otherSessionsSQL = `SELECT count(*) FROM pg_catalog.pg_stat_activity
		WHERE datname = pg_catalog.current_database() AND pid <> pg_catalog.pg_backend_pid() AND usesysid IS NOT NULL
		  AND coalesce(application_name, '') NOT LIKE 'dataenv/%'`

	// sequencesSQL: the position of every sequence the admin may read (NULL: never called).
	sequencesSQL = `
SELECT n.nspname, c.relname, pg_catalog.pg_sequence_last_value(c.oid)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'S' AND CASE WHEN c.relkind = 'S' THEN pg_catalog.has_sequence_privilege(c.oid, 'SELECT, USAGE') END
   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                      AND d.objid = c.oid AND d.deptype = 'e')`

	unreadableSequencesSQL = `
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'S' AND CASE WHEN c.relkind = 'S' THEN NOT pg_catalog.has_sequence_privilege(c.oid, 'SELECT, USAGE') END`

	populatedSQL = `
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind = 'm' AND c.relispopulated ORDER BY 1`

	// tablesRowsSQL: tables whose rows a dump by the admin cannot read: no SELECT at all (the
	// dump fails), or row-level security that applies to the admin ($1: the admin bypasses it).
	tablesRowsSQL = `
SELECT pg_catalog.format('%I.%I', n.nspname, c.relname), pg_catalog.has_table_privilege(c.oid, 'SELECT'),
       '"' || pg_catalog.replace(n.nspname, '"', '""') || '"."' || pg_catalog.replace(c.relname, '"', '""') || '"'
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
   AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                      AND d.objid = c.oid AND d.deptype = 'e')
   AND (NOT pg_catalog.has_table_privilege(c.oid, 'SELECT')
        OR (c.relkind = 'r' AND c.relrowsecurity AND NOT $1
            AND (c.relforcerowsecurity OR NOT pg_catalog.pg_has_role(c.relowner, 'USAGE'))))
 ORDER BY 1`

	// uncreatableSQL: what only a superuser may create (PostgreSQL 15-18), outside extensions.
	// An aggregate's own pg_proc row is in language internal whatever its support functions are
	// written in; CREATE AGGREGATE needs no superuser (its support functions are listed on their
	// own), so aggregates are not taken for functions in an untrusted language.
	uncreatableSQL = `
WITH member AS (SELECT classid, objid FROM pg_catalog.pg_depend WHERE deptype IN ('e', 'i'))
SELECT 'pg_catalog.pg_event_trigger'::pg_catalog.regclass::oid, e.oid, 'event trigger ' || pg_catalog.quote_ident(e.evtname),
       'only a superuser may create event triggers'
  FROM pg_catalog.pg_event_trigger e
UNION ALL
SELECT 'pg_catalog.pg_publication'::pg_catalog.regclass::oid, p.oid, 'publication ' || pg_catalog.quote_ident(p.pubname),
       'only a superuser may create a publication FOR ALL TABLES or FOR TABLES IN SCHEMA'
  FROM pg_catalog.pg_publication p
 WHERE p.puballtables OR EXISTS (SELECT FROM pg_catalog.pg_publication_namespace pn WHERE pn.pnpubid = p.oid)
UNION ALL
SELECT 'pg_catalog.pg_extension'::pg_catalog.regclass::oid, x.oid, 'extension ' || pg_catalog.quote_ident(x.extname),
       'not a trusted extension (or not installed on the server): only a superuser may create it'
  FROM pg_catalog.pg_extension x
 WHERE ` + untrustedExtensionSQL + `
UNION ALL
SELECT 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass::oid, w.oid, 'foreign-data wrapper ' || pg_catalog.quote_ident(w.fdwname),
       'only a superuser may create a foreign-data wrapper'
  FROM pg_catalog.pg_foreign_data_wrapper w
 WHERE w.oid >= 16384 AND NOT EXISTS (SELECT FROM member m WHERE m.classid = 'pg_catalog.pg_foreign_data_wrapper'::pg_catalog.regclass AND m.objid = w.oid)
UNION ALL
SELECT 'pg_catalog.pg_language'::pg_catalog.regclass::oid, l.oid, 'language ' || pg_catalog.quote_ident(l.lanname),
       'only a superuser may create a procedural language'
  FROM pg_catalog.pg_language l
 WHERE l.oid >= 16384 AND NOT EXISTS (SELECT FROM member m WHERE m.classid = 'pg_catalog.pg_language'::pg_catalog.regclass AND m.objid = l.oid)
UNION ALL
SELECT 'pg_catalog.pg_opclass'::pg_catalog.regclass::oid, c.oid, 'operator class ' || (pg_catalog.pg_identify_object('pg_catalog.pg_opclass'::pg_catalog.regclass, c.oid, 0)).identity,
       'only a superuser may create an operator class'
  FROM pg_catalog.pg_opclass c
 WHERE c.oid >= 16384 AND NOT EXISTS (SELECT FROM member m WHERE m.classid = 'pg_catalog.pg_opclass'::pg_catalog.regclass AND m.objid = c.oid)
UNION ALL
SELECT 'pg_catalog.pg_opfamily'::pg_catalog.regclass::oid, f.oid, 'operator family ' || (pg_catalog.pg_identify_object('pg_catalog.pg_opfamily'::pg_catalog.regclass, f.oid, 0)).identity,
       'only a superuser may create an operator family'
  FROM pg_catalog.pg_opfamily f
 WHERE f.oid >= 16384 AND NOT EXISTS (SELECT FROM member m WHERE m.classid = 'pg_catalog.pg_opfamily'::pg_catalog.regclass AND m.objid = f.oid)
UNION ALL
SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass::oid, p.oid, 'function ' || (pg_catalog.pg_identify_object('pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, 0)).identity,
       'written in ' || l.lanname || ', a language only a superuser may use'
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
 WHERE p.oid >= 16384 AND NOT l.lanpltrusted AND p.prokind <> 'a'
   AND NOT EXISTS (SELECT FROM member m WHERE m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = p.oid)
UNION ALL
SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::oid, t.oid, 'type ' || pg_catalog.format_type(t.oid, NULL),
       'a base type: only a superuser may create one'
  FROM pg_catalog.pg_type t
 WHERE t.oid >= 16384 AND t.typtype = 'b' AND t.typrelid = 0
   AND NOT EXISTS (SELECT FROM member m WHERE m.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND m.objid = t.oid)`

	// subscriptionsSQL: subscriptions are never copied (a fork must not consume its parent's
	// publisher); the result says so.
	subscriptionsSQL = `
SELECT 'subscription ' || pg_catalog.quote_ident(s.subname) FROM pg_catalog.pg_subscription s
 WHERE s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())`

	securityLabelsSQL = `SELECT count(*) FROM pg_catalog.pg_seclabel`
)

// readParentPlan reads the plan of database parent of cluster, as its admin, in one snapshot.
// mode says what is needed: sequence positions for schema_only, readable rows for full_copy.
func (s *Service) readParentPlan(ctx context.Context, clusterName, parent, mode string) (*parentPlan, error) {
	conn, err := s.cfg.Clusters.Connect(ctx, clusterName, parent)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return readPlanOn(ctx, conn, parent, mode, nil)
}

// readPlanOn is readParentPlan on conn, an admin connection to the parent. For a schema_only
// plan, early (if not nil) gets the plan's head (planHead) as soon as it is read, in the same
// snapshot as the rest, which is read after it.
func readPlanOn(ctx context.Context, conn *pgx.Conn, parent, mode string, early func(*parentPlan)) (*parentPlan, error) {
	p := &parentPlan{Database: parent, ObjectACLs: map[string]*objectACL{}}
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		return p.read(ctx, tx, mode, early)
	})
	if err != nil {
		return nil, retryable(fmt.Errorf("read what a fork of %q must keep: %w", parent, err))
	}
	return p, nil
}

func (p *parentPlan) read(ctx context.Context, tx pgx.Tx, mode string, early func(*parentPlan)) error {
	l := &p.Locale
	if err := tx.QueryRow(ctx, parentDatabaseSQL).Scan(&p.Owner, &l.Encoding, &l.Collate, &l.Ctype, &l.Provider, &l.Locale,
		&p.ConnLimit, &p.adminSuper, &p.adminBypass, &p.serverNum); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	// The rest depends only on what the first query returned: one round trip (pipelined), or
	// two for a schema_only plan whose head is wanted early.
	steps := []func(context.Context, querier) error{
		p.readDatabaseACL, p.readSettings, p.readOwnerRoles, p.readObjectACLs, p.readDefaultACLs, p.readUncreatable,
		func(ctx context.Context, q querier) error {
			return q.QueryRow(ctx, eventTriggersSQL).Scan(&p.EventTriggers)
		},
		func(ctx context.Context, q querier) error {
			return q.QueryRow(ctx, otherSessionsSQL).Scan(&p.OtherSessions)
		},
		p.readPopulated,
	}
	head := []func(context.Context, querier) error{p.readRows, p.readAdminExtensions}
	if mode == ModeSchemaOnly {
		head = append(head, p.readFingerprint)
		steps = append(steps, p.readSequences)
	}
	if mode == ModeSchemaOnly && early != nil {
		if err := pipelined(ctx, tx, head); err != nil {
			return err
		}
		early(p.head())
		if err := crashpoint.FailOnce(CrashFailAfterPlanHead); err != nil {
			return err // tests: the rest of the read fails after the copy may have been made
		}
	} else {
		steps = append(head, steps...)
	}
	if err := pipelined(ctx, tx, steps); err != nil {
		return err
	}
	p.withoutWorkspaceRoles()
	p.withoutAdminExtensions()
	return nil
}

// head is a copy of what the plan's head read (its database query, readable tables and
// fingerprint): all a schema_only copy's database needs to be created (the schema template to
// copy, or the locale and tools of a dump), made while the rest of the plan is read.
func (p *parentPlan) head() *parentPlan {
	return &parentPlan{Database: p.Database, Owner: p.Owner, Locale: p.Locale, ConnLimit: p.ConnLimit,
		Unreadable: p.Unreadable, NoRows: p.NoRows, NoRowsPatterns: p.NoRowsPatterns, Fingerprint: p.Fingerprint, AdminExtensions: p.AdminExtensions,
		adminSuper: p.adminSuper, adminBypass: p.adminBypass, serverNum: p.serverNum}
}

func (p *parentPlan) readDatabaseACL(ctx context.Context, tx querier) error {
	items, err := readDatabaseACL(ctx, tx, p.Database)
	p.DatabaseACL = items
	return err
}

// readDatabaseACL explodes the ACL of database name (q: any connection to the cluster).
func readDatabaseACL(ctx context.Context, q querier, name string) ([]aclItem, error) {
	rows, err := q.Query(ctx, databaseACLSQL, name)
	if err != nil {
		return nil, fmt.Errorf("access list of database %q: %w", name, err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (aclItem, error) {
		var a aclItem
		return a, r.Scan(&a.Grantor, &a.Grantee, &a.Privilege, &a.Grantable)
	})
	if err != nil {
		return nil, fmt.Errorf("access list of database %q: %w", name, err)
	}
	return items, nil
}

func (p *parentPlan) readSettings(ctx context.Context, tx querier) error {
	rows, err := tx.Query(ctx, settingsSQL, p.Database)
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (roleSetting, error) {
		var s roleSetting
		return s, r.Scan(&s.Role, &s.Setting)
	})
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	for _, s := range all {
		if s.Role == "" {
			p.Settings = append(p.Settings, s.Setting)
		} else {
			p.RoleSett = append(p.RoleSett, s)
		}
	}
	return nil
}

func (p *parentPlan) readOwnerRoles(ctx context.Context, tx querier) error {
	rows, err := tx.Query(ctx, ownerRolesSQL)
	if err != nil {
		return fmt.Errorf("owners: %w", err)
	}
	p.OwnerRoles, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ownerRole, error) {
		var o ownerRole
		return o, r.Scan(&o.Name, &o.Super, &o.CanAct)
	})
	if err != nil {
		return fmt.Errorf("owners: %w", err)
	}
	return nil
}

func (p *parentPlan) readSequences(ctx context.Context, tx querier) error {
	rows, err := tx.Query(ctx, sequencesSQL)
	if err != nil {
		return fmt.Errorf("sequences: %w", err)
	}
	for rows.Next() {
		var sp sequencePosition
		var last *int64
		if err := rows.Scan(&sp.Schema, &sp.Name, &last); err != nil {
			rows.Close()
			return fmt.Errorf("sequences: %w", err)
		}
		if last != nil {
			sp.LastValue = *last
			p.Sequences = append(p.Sequences, sp)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sequences: %w", err)
	}
	return collectInto(ctx, tx, unreadableSequencesSQL, nil, func(name string) {
		p.SequencesLeft = append(p.SequencesLeft, notCarried{Object: "position of sequence " + name,
			Reason: "the cluster's admin may not read the sequence; it starts afresh in the fork"})
	})
}

func (p *parentPlan) readPopulated(ctx context.Context, tx querier) error {
	return collectInto(ctx, tx, populatedSQL, nil, func(name string) { p.Populated = append(p.Populated, name) })
}

// readRows finds the tables a dump by the admin cannot read in full.
func (p *parentPlan) readRows(ctx context.Context, tx querier) error {
	rows, err := tx.Query(ctx, tablesRowsSQL, p.adminBypass)
	if err != nil {
		return fmt.Errorf("readable tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, pattern string
		var canSelect bool
		if err := rows.Scan(&name, &canSelect, &pattern); err != nil {
			return fmt.Errorf("readable tables: %w", err)
		}
		if !canSelect {
			p.Unreadable = append(p.Unreadable, name)
			continue
		}
		p.NoRowsPatterns = append(p.NoRowsPatterns, pattern)
		p.NoRows = append(p.NoRows, notCarried{Object: "rows of table " + name,
			Reason: "row-level security applies to the cluster's admin (forced, or the admin does not own the table) and it has no BYPASSRLS: " +
				"a dump would not see every row. A TEMPLATE copy (nobody connected to the parent) copies them."})
	}
	return rows.Err()
}

func (p *parentPlan) readUncreatable(ctx context.Context, tx querier) error {
	rows, err := tx.Query(ctx, uncreatableSQL)
	if err != nil {
		return fmt.Errorf("superuser-only objects: %w", err)
	}
	p.Uncreatable, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (uncreatable, error) {
		var u uncreatable
		return u, r.Scan(&u.Catalog, &u.OID, &u.Object, &u.Reason)
	})
	if err != nil {
		return fmt.Errorf("superuser-only objects: %w", err)
	}
	if err := collectInto(ctx, tx, subscriptionsSQL, nil, func(name string) {
		p.Uncreatable = append(p.Uncreatable, uncreatable{notCarried: notCarried{Object: name,
			Reason: "subscriptions are never copied: a fork must not consume its parent's publisher"}})
	}); err != nil {
		return fmt.Errorf("subscriptions: %w", err)
	}
	var labels int
	if err := tx.QueryRow(ctx, securityLabelsSQL).Scan(&labels); err != nil {
		return fmt.Errorf("security labels: %w", err)
	}
	if labels > 0 {
		p.Uncreatable = append(p.Uncreatable, uncreatable{notCarried: notCarried{Object: fmt.Sprintf("%d security label(s)", labels),
			Reason: "security labels need their label provider and a superuser; they are not copied"}})
	}
	return nil
}

// collectInto runs sql (one text column) and calls fn with each value.
func collectInto(ctx context.Context, q querier, sql string, args []any, fn func(string)) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, v := range vals {
		fn(v)
	}
	return nil
}

// querier is what the catalog readers need of a connection or transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ownerSet is the set of owner role names.
func (p *parentPlan) ownerSet() map[string]bool {
	m := make(map[string]bool, len(p.OwnerRoles))
	for _, o := range p.OwnerRoles {
		m[o.Name] = true
	}
	return m
}

// mapper maps a role of the parent to the fork: the parent's owner roles become owner.
func (p *parentPlan) mapper(owner string) func(string) string {
	owners := p.ownerSet()
	return func(role string) string {
		if owners[role] {
			return owner
		}
		return role
	}
}

// templateOK says why a full_copy of this parent cannot be a TEMPLATE copy ("" when it can): a
// session is connected (besides the plan's own, which has closed since: CREATE DATABASE waits
// a few seconds for a backend that is exiting), an event trigger would fire on the DDL that maps the owners,
// or the admin may not act as one of the owner roles whose objects must change owner (a dump
// and restore run as the fork's owner needs no such right).
func (p *parentPlan) templateOK() string {
	if p.OtherSessions > 0 {
		return "other sessions are connected to the parent"
	}
	if p.EventTriggers > 0 {
		return fmt.Sprintf("the parent has %d event trigger(s), which the DDL mapping a TEMPLATE copy's owners would fire", p.EventTriggers)
	}
	var cannot []string
	for _, o := range p.OwnerRoles {
		if !o.CanAct {
			cannot = append(cannot, o.Name)
		}
	}
	if len(cannot) > 0 {
		return "the cluster's admin may not act as " + strings.Join(cannot, ", ") +
			", whose objects a TEMPLATE copy would have to give to the fork's owner"
	}
	return ""
}

// subscriptions are the parent's subscriptions (never copied, whatever the method).
func (p *parentPlan) subscriptions() []notCarried {
	var out []notCarried
	for _, u := range p.Uncreatable {
		if u.Catalog == 0 && strings.HasPrefix(u.Object, "subscription ") {
			out = append(out, u.notCarried)
		}
	}
	return out
}

// fidelity is a copy's report.
func (p *parentPlan) fidelity(job *copyJob, mode string, left []notCarried) *Fidelity {
	f := &Fidelity{Owner: job.owner, MethodReason: job.reason, NotCarried: nonNil(append(left, p.WorkspaceRolesLeft...)), MappedRoles: []string{}}
	for _, o := range p.OwnerRoles {
		if o.Name != job.owner {
			f.MappedRoles = append(f.MappedRoles, o.Name)
		}
	}
	if mode == ModeSchemaOnly {
		f.Unpopulated = p.Populated
		f.Sequences = len(p.Sequences)
		f.NotCarried = append(f.NotCarried, p.SequencesLeft...)
		if job.template != nil {
			f.SchemaTemplate = &TemplateUse{Database: job.template.Database, Status: "used", Spare: job.tookSpare}
		}
	}
	return f
}
