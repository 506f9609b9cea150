package workspace

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fidelity is what a copy's result says about what it kept of its parent: the role that owns it,
// the parent's roles that role now plays, what could not be carried and why.
type Fidelity struct {
	// Owner owns the copy and everything the parent's owners owned.
	Owner string `json:"owner"`
	// MappedRoles are the parent's owner roles (of the database, of objects, of default
	// privileges) whose objects, grants and settings now belong to Owner.
	MappedRoles []string `json:"mapped_roles"`
	// MethodReason says why a full_copy of an idle parent was not a TEMPLATE copy.
	MethodReason string       `json:"method_reason,omitempty"`
	NotCarried   []notCarried `json:"not_carried"`
	// Unpopulated are the materialized views the parent has populated and a schema_only copy
	// leaves unpopulated (REFRESH MATERIALIZED VIEW fills them).
	Unpopulated []string `json:"unpopulated_materialized_views,omitempty"`
	// Sequences is how many sequences were set to the parent's positions (schema_only).
	Sequences int `json:"sequences_at_parent_position,omitempty"`
	// SchemaTemplate: which schema template a schema_only copy was made from, or which request
	// is building one.
	SchemaTemplate *TemplateUse `json:"schema_template,omitempty"`
}

// TemplateUse is how a schema_only copy relates to its datatable's schema template.
type TemplateUse struct {
	Database string `json:"database,omitempty"`
	// Status: used (the copy is a TEMPLATE copy of it, and Request makes its next spare),
	// building (the parent's schema changed or there was none: the copy was restored from a
	// dump, and Request builds the template).
	Status  string `json:"status"`
	Request string `json:"request,omitempty"`
	// Spare: the copy is this spare of the template, renamed (made beforehand by the
	// template's refresh, spare.go); the fork asked for the next one.
	Spare string `json:"spare,omitempty"`
}

// finishJob brings one copy to its parent's plan, whatever made it.
type finishJob struct {
	plan     *parentPlan
	cluster  string
	database string
	owner    string // the copy's owner (forkOwnerOf)
	mode     string
	// reown: the copy is a TEMPLATE copy; objects of these roles are re-owned by owner.
	reown []string
	// dropRole, one of reown, is a taken spare's role (names.TakenSpareRole): dropped once it
	// owns nothing and holds no privilege (dropTakenRole).
	dropRole string
	// database-level settings and access list: not for a schema template (each fork gets them).
	databaseLevel bool
	sequences     bool
	// conn, when set, is the admin's connection to the copy (the caller closes it); else finish
	// opens one.
	conn *pgx.Conn
	// phases, when set, collects how long each phase of the finish took, for the copy's step.
	phases *phaseTimes
}

// phaseTimes is how long each phase of a copy's finish took ("re-own 1000 objects 310ms"): the
// copy's "done" step says it, so where the time of a fork goes can be read off its request.
type phaseTimes struct {
	now   func() time.Time
	last  time.Time
	parts []string
}

func newPhaseTimes(now func() time.Time) *phaseTimes { return &phaseTimes{now: now, last: now()} }

// mark ends the phase named what.
func (p *phaseTimes) mark(what string) {
	if p == nil {
		return
	}
	t := p.now()
	p.parts = append(p.parts, what+" "+ms(t.Sub(p.last)).String())
	p.last = t
}

// ms rounds d to the millisecond, as the steps give durations.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func (p *phaseTimes) String() string {
	if p == nil || len(p.parts) == 0 {
		return ""
	}
	return strings.Join(p.parts, ", ")
}

// finish maps the copy's owners, sets its privileges and default privileges to the parent's
// (mapped), its sequences to the parent's positions (schema_only), then its settings, role
// settings, connection limit and access list. What the admin may not reproduce is reported in
// the returned list, not failed on. The admin does this work, acting as each grantor or owner
// (SET ROLE) in statements that run no code of the parent's roles (DDL on a copy that has no
// event trigger: checked first).
func (s *Service) finish(ctx context.Context, j finishJob) ([]notCarried, error) {
	conn := j.conn
	if conn == nil {
		var err error
		if conn, err = s.cfg.Clusters.Connect(ctx, j.cluster, j.database); err != nil {
			return nil, err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		j.phases.mark("connect")
	}
	var left []notCarried
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		if left, err = j.finishObjects(ctx, tx); err != nil || !j.databaseLevel {
			return err
		}
		more, err := j.finishDatabase(ctx, tx)
		left = append(left, more...)
		j.phases.mark("database settings and access list")
		return err
	})
	j.phases.mark("commit")
	if err != nil {
		return nil, retryable(fmt.Errorf("finish copy %q: %w", j.database, err))
	}
	return left, nil
}

func (j finishJob) finishObjects(ctx context.Context, tx pgx.Tx) ([]notCarried, error) {
	// The event trigger check and the list of objects to re-own in one round trip; nothing runs
	// before the check has passed.
	var triggers int
	var stmts []statement
	var unmapped []notCarried
	steps := []func(context.Context, querier) error{func(ctx context.Context, q querier) error {
		return q.QueryRow(ctx, eventTriggersSQL).Scan(&triggers)
	}}
	if len(j.reown) > 0 {
		steps = append(steps, func(ctx context.Context, q querier) (err error) {
			stmts, unmapped, err = reownStatements(ctx, q, j.reown, j.owner)
			return err
		})
	}
	if err := pipelined(ctx, tx, steps); err != nil {
		return nil, err
	}
	if triggers > 0 {
		return nil, fmt.Errorf("the copy has %d enabled event trigger(s): dataenv runs no DDL where they could fire", triggers)
	}
	j.phases.mark(fmt.Sprintf("event trigger check and %d objects to re-own listed", len(stmts)))
	var left []notCarried
	// reownFailed: an ALTER ... OWNER of the batch failed, so the owners are checked again at the
	// end; when every one succeeded that check would list the same objects again (reownSQL) and
	// find none, so it is not run.
	reownFailed := false
	if len(j.reown) > 0 {
		left = append(left, unmapped...)
		failed := apply(ctx, tx, stmts)
		reownFailed = len(failed) > 0
		left = append(left, failed...)
		j.phases.mark("re-own")
	}
	acts, err := j.aclStatements(ctx, tx)
	if err != nil {
		return nil, err
	}
	j.phases.mark("read privileges")
	left = append(left, acts.left...)
	left = append(left, apply(ctx, tx, acts.stmts)...)
	j.phases.mark(fmt.Sprintf("%d privilege statements", len(acts.stmts)))
	if j.sequences {
		if err := setSequences(ctx, tx, j.plan.Sequences); err != nil {
			return nil, err
		}
		j.phases.mark(fmt.Sprintf("%d sequences", len(j.plan.Sequences)))
	}
	if reownFailed {
		still, err := stillOwned(ctx, tx, j.reown, j.owner)
		if err != nil {
			return nil, err
		}
		left = append(left, still...)
		j.phases.mark("check owners")
	}
	more, err := j.shutOutForeignRoles(ctx, tx)
	j.phases.mark("check other workspaces' roles")
	if err != nil {
		return nil, err
	}
	if j.dropRole != "" {
		if err := dropTakenRole(ctx, tx, j.dropRole); err != nil {
			return nil, err
		}
		j.phases.mark("drop the spare's role")
	}
	return append(left, more...), nil
}

// unusedRoleSQL: role $1 exists and nothing on the cluster depends on it (owns, grants, policies).
const unusedRoleSQL = `SELECT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = $1
	AND NOT EXISTS (SELECT FROM pg_catalog.pg_shdepend d
	                 WHERE d.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND d.refobjid = r.oid))`

// dropTakenRole drops role, a taken spare's whose objects the finish re-owned, in the finish's
// transaction: a crash leaves the copy unfinished with the role, which the copy's drop drops
// (dropCopyDatabase), never a finished copy with it. A role that still owns or holds something
// (an object the re-own could not move, reported) stays until that drop.
func dropTakenRole(ctx context.Context, tx pgx.Tx, role string) error {
	var unused bool
	if err := tx.QueryRow(ctx, unusedRoleSQL, role).Scan(&unused); err != nil {
		return fmt.Errorf("check what role %q still owns: %w", role, err)
	}
	if !unused {
		return nil
	}
	if _, err := tx.Exec(ctx, "DROP ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		return fmt.Errorf("drop the spare's role %q: %w", role, err)
	}
	return nil
}

// reownSQL lists the objects of the copy owned by roles $1 (other than $2) that belong to no
// other object; schemas first (the new owner needs CREATE on an object's schema), sequences
// owned by a table column left to their table; independentSQL tells what belongs to another
// object. Objects of the bootstrap superuser have no pg_shdepend row: they are found in the
// catalogs.
const reownSQL = `
WITH s (classid, objid, owner) AS (
    SELECT s.classid, s.objid, s.refobjid FROM pg_catalog.pg_shdepend s
     WHERE s.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) AND s.deptype = 'o'
    UNION ALL
    SELECT b.classid, b.objid, 10 FROM (` + bootstrapOwnedSQL + `) b
     WHERE EXISTS (SELECT FROM pg_catalog.pg_roles WHERE oid = 10 AND rolname = ANY($1))
)
SELECT i.type, i.identity, r.rolname
  FROM s o
  JOIN pg_catalog.pg_roles r ON r.oid = o.owner
 CROSS JOIN LATERAL pg_catalog.pg_identify_object(o.classid, o.objid, 0) i
 WHERE r.rolname = ANY($1) AND r.rolname <> $2 AND ` + independentSQL + `
   AND NOT (o.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND EXISTS (
            SELECT FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_class c ON c.oid = d.objid
             WHERE d.classid = o.classid AND d.objid = o.objid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
               AND d.refobjsubid > 0 AND d.deptype = 'a' AND c.relkind = 'S'))
 ORDER BY i.type <> 'schema', i.type, i.identity`

// alterKeyword is the ALTER command of a pg_identify_object type whose owner can change.
var alterKeyword = map[string]string{
	"table": "TABLE", "view": "VIEW", "materialized view": "MATERIALIZED VIEW", "sequence": "SEQUENCE",
	"foreign table": "FOREIGN TABLE", "function": "ROUTINE", "procedure": "ROUTINE", "aggregate": "ROUTINE",
	"type": "TYPE", "composite type": "TYPE", "domain": "DOMAIN", "schema": "SCHEMA", "collation": "COLLATION",
	"conversion": "CONVERSION", "operator": "OPERATOR", "operator class": "OPERATOR CLASS",
	"operator family": "OPERATOR FAMILY", "text search configuration": "TEXT SEARCH CONFIGURATION",
	"text search dictionary": "TEXT SEARCH DICTIONARY", "foreign-data wrapper": "FOREIGN DATA WRAPPER",
	"server": "SERVER", "publication": "PUBLICATION", "large object": "LARGE OBJECT",
	"statistics object": "STATISTICS", "language": "LANGUAGE",
}

// reownStatements are the ALTER ... OWNER TO owner of a TEMPLATE copy's objects that the
// parent's other owner roles own. Default privileges are not among them (they are set like
// privileges); extensions and user mappings cannot change owner and are reported.
func reownStatements(ctx context.Context, tx querier, roles []string, owner string) ([]statement, []notCarried, error) {
	rows, err := tx.Query(ctx, reownSQL, roles, owner)
	if err != nil {
		return nil, nil, fmt.Errorf("objects to re-own: %w", err)
	}
	defer rows.Close()
	var stmts []statement
	var left []notCarried
	for rows.Next() {
		var typ, identity, old string
		if err := rows.Scan(&typ, &identity, &old); err != nil {
			return nil, nil, err
		}
		if typ == "default acl" {
			continue
		}
		kw, ok := alterKeyword[typ]
		if !ok {
			left = append(left, notCarried{Object: typ + " " + identity,
				Reason: fmt.Sprintf("keeps its owner %s: PostgreSQL cannot give a %s another owner (other than by REASSIGN OWNED, which would also hand over %s's databases)", old, typ, old)})
			continue
		}
		stmts = append(stmts, statement{SQL: "ALTER " + kw + " " + identity + " OWNER TO " + ident(owner),
			What: fmt.Sprintf("owner of %s %s (%s in the parent)", typ, identity, old)})
	}
	return stmts, left, rows.Err()
}

// stillOwned reports the objects a re-owning left with the parent's roles.
func stillOwned(ctx context.Context, tx pgx.Tx, roles []string, owner string) ([]notCarried, error) {
	rows, err := tx.Query(ctx, reownSQL, roles, owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var left []notCarried
	for rows.Next() {
		var typ, identity, old string
		if err := rows.Scan(&typ, &identity, &old); err != nil {
			return nil, err
		}
		if _, ok := alterKeyword[typ]; ok { // the others are reported already
			left = append(left, notCarried{Object: typ + " " + identity, Reason: "still owned by " + old})
		}
	}
	return left, rows.Err()
}

type actions struct {
	stmts []statement
	left  []notCarried
}

// aclStatements compares the copy's privileges and default privileges with the parent's
// (mapped) and returns the statements that make them equal.
func (j finishJob) aclStatements(ctx context.Context, tx pgx.Tx) (actions, error) {
	var a actions
	m := j.plan.mapper(j.owner)
	var current map[string]*objectACL
	var currentDefaults []defaultACL
	if err := pipelined(ctx, tx, []func(context.Context, querier) error{
		func(ctx context.Context, q querier) (err error) { current, err = readObjectACLs(ctx, q); return err },
		func(ctx context.Context, q querier) (err error) {
			currentDefaults, err = readDefaultACLs(ctx, q)
			return err
		},
	}); err != nil {
		return a, err
	}
	pairs := map[[2]string]bool{}
	for k, o := range j.plan.ObjectACLs {
		if _, ok := current[k]; !ok && o.Kind != "" {
			pairs[[2]string{o.Kind, m(o.Owner)}] = true
		}
	}
	for k, o := range current {
		if _, ok := j.plan.ObjectACLs[k]; !ok && o.Kind != "" {
			pairs[[2]string{o.Kind, o.Owner}] = true
		}
	}
	target := mapDefaults(j.plan.DefaultACLs, m)
	for _, d := range append(slices.Clone(currentDefaults), target...) {
		if d.Schema == "" {
			pairs[[2]string{defaultKinds[d.ObjType][0], d.Role}] = true
		}
	}
	defaults, err := readACLDefaults(ctx, tx, pairs)
	if err != nil {
		return a, err
	}
	if err := j.objectStatements(&a, current, defaults, m); err != nil {
		return a, err
	}
	if err := defaultStatements(&a, currentDefaults, target, defaults); err != nil {
		return a, err
	}
	return a, checkActors(ctx, tx, &a)
}

// objectStatements adds the GRANT and REVOKE statements of every object whose access list
// differs. In schema_only copies large objects do not exist (they are data).
func (j finishJob) objectStatements(a *actions, current map[string]*objectACL, defaults aclDefaults, m func(string) string) error {
	keys := make([]string, 0, len(j.plan.ObjectACLs)+len(current))
	for k := range j.plan.ObjectACLs {
		keys = append(keys, k)
	}
	for k := range current {
		if _, ok := j.plan.ObjectACLs[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, have := j.plan.ObjectACLs[k], current[k]
		var obj *objectACL
		var tgt, cur []aclItem
		switch {
		case want != nil && have == nil:
			if want.Type == "large object" && j.mode == ModeSchemaOnly {
				continue
			}
			obj, tgt = want, mapItems(want.Items, m)
			cur = defaults[[2]string{want.Kind, m(want.Owner)}]
		case want == nil:
			obj, cur = have, have.Items
			tgt = defaults[[2]string{have.Kind, have.Owner}]
		default:
			obj, tgt, cur = have, mapItems(want.Items, memberMapper(want, have, m)), have.Items
		}
		sortItems(cur)
		c := diffItems(mapItems(cur, func(s string) string { return s }), tgt)
		if c.empty() {
			continue
		}
		kw := grantKeyword(obj.Type)
		if kw == "" {
			a.left = append(a.left, notCarried{Object: "privileges of " + obj.String(), Reason: "dataenv cannot grant privileges on a " + obj.Type})
			continue
		}
		on := kw + " " + obj.Identity
		owner := m(obj.Owner)
		if have != nil {
			owner = have.Owner
		}
		stmts, err := grantStatements(on, obj.Column, owner, "privileges of "+obj.String(), c)
		if err != nil {
			return err
		}
		a.stmts = append(a.stmts, stmts...)
	}
	return nil
}

// memberMapper maps the roles of an object's privileges from the parent (want) to the copy
// (have). An object the copy's owner does not own is an extension's member (an extension keeps
// its owner in a TEMPLATE copy, and one the admin made belongs to the admin): its owner in the
// parent maps to its owner in the copy, so that the grants of the extension's script stay as
// they are, and the others are carried as they were.
func memberMapper(want, have *objectACL, m func(string) string) func(string) string {
	if have.Owner == m(want.Owner) {
		return m
	}
	return func(role string) string {
		if role == want.Owner {
			return have.Owner
		}
		return m(role)
	}
}

// mapDefaults maps the roles of the parent's default privileges and merges the entries that now
// belong to one role.
func mapDefaults(in []defaultACL, m func(string) string) []defaultACL {
	byKey := map[string]*defaultACL{}
	var order []string
	for _, d := range in {
		md := defaultACL{Role: m(d.Role), Schema: d.Schema, ObjType: d.ObjType}
		e := byKey[md.key()]
		if e == nil {
			e = &md
			byKey[md.key()] = e
			order = append(order, md.key())
		}
		e.Items = append(e.Items, d.Items...)
	}
	out := make([]defaultACL, 0, len(order))
	for _, k := range order {
		e := byKey[k]
		e.Items = mapItems(e.Items, m)
		out = append(out, *e)
	}
	return out
}

// defaultStatements adds the ALTER DEFAULT PRIVILEGES statements that make the copy's default
// privileges the (mapped) parent's. An entry that does not exist has the built-in privileges
// (everywhere) or none (in a schema).
func defaultStatements(a *actions, current, target []defaultACL, defaults aclDefaults) error {
	effective := func(d *defaultACL) []aclItem {
		if d != nil && (d.Items != nil || d.Schema != "") {
			return d.Items
		}
		return nil
	}
	cur, tgt := map[string]*defaultACL{}, map[string]*defaultACL{}
	var keys []string
	for i := range current {
		cur[current[i].key()] = &current[i]
		keys = append(keys, current[i].key())
	}
	for i := range target {
		if _, ok := cur[target[i].key()]; !ok {
			keys = append(keys, target[i].key())
		}
		tgt[target[i].key()] = &target[i]
	}
	sort.Strings(keys)
	for _, k := range keys {
		c, t := cur[k], tgt[k]
		d := t
		if d == nil {
			d = c
		}
		builtin := func(x *defaultACL) []aclItem {
			if x == nil && d.Schema == "" {
				return defaults[[2]string{defaultKinds[d.ObjType][0], d.Role}]
			}
			return effective(x)
		}
		ci, ti := mapItems(builtin(c), func(s string) string { return s }), mapItems(builtin(t), func(s string) string { return s })
		change := diffItems(ci, ti)
		if change.empty() {
			continue
		}
		stmts, err := defaultACLStatements(*d, change)
		if err != nil {
			return err
		}
		a.stmts = append(a.stmts, stmts...)
	}
	return nil
}

// checkActors keeps the statements whose actor the admin may act as, and reports the others.
func checkActors(ctx context.Context, q querier, a *actions) error {
	var names []string
	for _, s := range a.stmts {
		if s.Actor != "" && !slices.Contains(names, s.Actor) {
			names = append(names, s.Actor)
		}
	}
	can, err := canActAs(ctx, q, names)
	if err != nil {
		return err
	}
	kept := a.stmts[:0]
	for _, s := range a.stmts {
		if s.Actor != "" && !can[s.Actor] {
			a.left = append(a.left, notCarried{Object: s.What, Reason: "the cluster's admin may not act as " + s.Actor})
			continue
		}
		kept = append(kept, s)
	}
	a.stmts = kept
	return nil
}

const canActSQL = `
SELECT r.rolname, pg_catalog.pg_has_role(r.oid, 'USAGE') AND
       CASE WHEN pg_catalog.current_setting('server_version_num')::int >= 160000 THEN pg_catalog.pg_has_role(r.oid, 'SET')
            ELSE pg_catalog.pg_has_role(r.oid, 'MEMBER') END
  FROM pg_catalog.pg_roles r WHERE r.rolname = ANY($1)`

func canActAs(ctx context.Context, q querier, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(names) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, canActSQL, names)
	if err != nil {
		return nil, fmt.Errorf("roles the admin may act as: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		var ok bool
		if err := rows.Scan(&n, &ok); err != nil {
			return nil, err
		}
		out[n] = ok
	}
	return out, rows.Err()
}

// setSequences sets the copy's sequences to the parent's positions, so that ids made in a
// schema_only fork never collide with the parent's.
func setSequences(ctx context.Context, tx pgx.Tx, seqs []sequencePosition) error {
	if len(seqs) == 0 {
		return nil
	}
	schemas, names, values := make([]string, len(seqs)), make([]string, len(seqs)), make([]int64, len(seqs))
	for i, s := range seqs {
		schemas[i], names[i], values[i] = s.Schema, s.Name, s.LastValue
	}
	_, err := tx.Exec(ctx, `
SELECT pg_catalog.setval(c.oid, v.last, true)
  FROM unnest($1::text[], $2::text[], $3::int8[]) AS v(nsp, rel, last)
  JOIN pg_catalog.pg_namespace n ON n.nspname = v.nsp
  JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = v.rel AND c.relkind = 'S'`, schemas, names, values)
	if err != nil {
		return fmt.Errorf("set the sequences to the parent's positions: %w", err)
	}
	return nil
}

// apply runs stmts in tx: all at once when they all succeed (one round trip: the savepoint, the
// statements and its release in one query string), else one by one, each in a savepoint,
// returning those that failed with PostgreSQL's reason.
func apply(ctx context.Context, tx pgx.Tx, stmts []statement) []notCarried {
	if len(stmts) == 0 {
		return nil
	}
	var all strings.Builder
	all.WriteString("SAVEPOINT dataenv_apply;\n")
	for _, s := range stmts {
		all.WriteString(s.text())
	}
	all.WriteString("RELEASE SAVEPOINT dataenv_apply")
	if _, err := tx.Exec(ctx, all.String()); err == nil {
		return nil
	}
	// One statement failed: back to before the batch (its SET ROLE too), then one by one.
	rollbackErr := rollbackBatch(ctx, tx)
	var left []notCarried
	for _, s := range stmts {
		err := rollbackErr
		if err == nil {
			err = inSavepoint(ctx, tx, s.text())
		}
		if err != nil {
			left = append(left, notCarried{Object: s.What, Reason: pgMessage(err)})
		}
	}
	return left
}

func rollbackBatch(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT dataenv_apply;\nRELEASE SAVEPOINT dataenv_apply")
	return err
}

func (s statement) text() string {
	if s.Actor == "" {
		return s.SQL + ";\n"
	}
	return "SET ROLE " + ident(s.Actor) + ";\n" + s.SQL + ";\nRESET ROLE;\n"
}

func inSavepoint(ctx context.Context, tx pgx.Tx, sql string) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := sp.Exec(ctx, sql); err != nil {
		_ = sp.Rollback(ctx)
		return err
	}
	return sp.Commit(ctx)
}

// pgMessage is an error's text without pgx's decoration.
func pgMessage(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "ERROR: ")
	return s
}

// finishDatabase sets what belongs to the copy's database in the cluster's shared catalogs: the
// connection limit, ALTER DATABASE ... SET, ALTER ROLE ... IN DATABASE ... SET (the parent's
// owner roles' settings become the owner's) and the access list (owners mapped; a parent that
// refused CONNECT to PUBLIC gives a copy that refuses it too). Done last: settings apply to every
// later session, dataenv's own included; they are set at the end of finish's transaction, on its
// connection to the copy (a database's own settings and ACL may be changed from inside it).
func (j finishJob) finishDatabase(ctx context.Context, tx pgx.Tx) ([]notCarried, error) {
	m := j.plan.mapper(j.owner)
	db := ident(j.database)
	var stmts []statement
	var left []notCarried
	if j.plan.ConnLimit >= 0 {
		stmts = append(stmts, statement{SQL: fmt.Sprintf("ALTER DATABASE %s CONNECTION LIMIT %d", db, j.plan.ConnLimit),
			What: "connection limit of the database"})
	}
	for _, set := range j.plan.Settings {
		st, err := setStatement("ALTER DATABASE "+db, set)
		if err != nil {
			left = append(left, notCarried{Object: "database setting " + set, Reason: err.Error()})
			continue
		}
		stmts = append(stmts, statement{SQL: st, What: "database setting " + set})
	}
	roleStmts, conflicts := roleSettingStatements(j.plan.RoleSett, m, db)
	stmts, left = append(stmts, roleStmts...), append(left, conflicts...)
	current, err := readDatabaseACL(ctx, tx, j.database)
	if err != nil {
		return nil, err
	}
	acl, err := grantStatements("DATABASE "+db, "", j.owner, "the database",
		diffItems(mapItems(current, func(s string) string { return s }), mapItems(j.plan.DatabaseACL, m)))
	if err != nil {
		return nil, err
	}
	a := actions{stmts: append(stmts, acl...)}
	if err := checkActors(ctx, tx, &a); err != nil {
		return nil, err
	}
	left = append(left, a.left...)
	return append(left, apply(ctx, tx, a.stmts)...), nil
}

// roleSettingStatements are the ALTER ROLE ... IN DATABASE ... SET statements of the parent's
// role settings, roles mapped; two owner roles that set one parameter differently conflict (the
// first, in role name order, wins and the other is reported).
func roleSettingStatements(settings []roleSetting, m func(string) string, db string) ([]statement, []notCarried) {
	var stmts []statement
	var left []notCarried
	seen := map[string]roleSetting{}
	for _, rs := range settings {
		role := m(rs.Role)
		name, _, _ := strings.Cut(rs.Setting, "=")
		k := role + " " + strings.ToLower(name)
		if prev, ok := seen[k]; ok {
			if prev.Setting != rs.Setting {
				left = append(left, notCarried{Object: fmt.Sprintf("setting %s of role %s", rs.Setting, rs.Role),
					Reason: fmt.Sprintf("role %s, also played by %s in the copy, sets %s", prev.Role, role, prev.Setting)})
			}
			continue
		}
		seen[k] = rs
		st, err := setStatement("ALTER ROLE "+ident(role)+" IN DATABASE "+db, rs.Setting)
		if err != nil {
			left = append(left, notCarried{Object: fmt.Sprintf("setting %s of role %s", rs.Setting, rs.Role), Reason: err.Error()})
			continue
		}
		what := fmt.Sprintf("setting %s of role %s", rs.Setting, rs.Role)
		if role != rs.Role {
			what += " (" + role + " in the copy)"
		}
		stmts = append(stmts, statement{SQL: st, What: what})
	}
	return stmts, left
}

var settingName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$`)

// listQuoted are the parameters whose stored value is a list of separately quoted elements
// (pg_dumpall's variable_is_guc_list_quote).
var listQuoted = []string{"local_preload_libraries", "search_path", "session_preload_libraries",
	"shared_preload_libraries", "temp_tablespaces", "unix_socket_directories"}

// setStatement is "<prefix> SET name = value" for a stored "name=value" setting: each element
// of a list parameter as its own literal, any other value as one literal (as pg_dumpall does).
func setStatement(prefix, setting string) (string, error) {
	name, value, ok := strings.Cut(setting, "=")
	if !ok || !settingName.MatchString(name) {
		return "", fmt.Errorf("not a parameter setting: %q", setting)
	}
	quoted := pgx.Identifier(strings.Split(name, ".")).Sanitize()
	if !slices.Contains(listQuoted, strings.ToLower(name)) {
		return prefix + " SET " + quoted + " = " + quoteLiteral(value), nil
	}
	elems := splitGUCList(value)
	lits := make([]string, len(elems))
	for i, e := range elems {
		lits[i] = quoteLiteral(e)
	}
	if len(lits) == 0 {
		return prefix + " SET " + quoted + " = ''", nil
	}
	return prefix + " SET " + quoted + " = " + strings.Join(lits, ", "), nil
}

// splitGUCList splits a stored list value at commas outside double quotes, trims blanks and
// removes the quotes (a doubled quote inside them is one quote).
func splitGUCList(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, any := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '"' && i+1 < len(s) && s[i+1] == '"':
			cur.WriteByte('"')
			i++
		case c == '"':
			inQuote, any = !inQuote, true
		case !inQuote && c == ',':
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		case !inQuote && (c == ' ' || c == '\t') && cur.Len() == 0:
		default:
			cur.WriteByte(c)
			any = true
		}
	}
	if any || len(out) > 0 {
		out = append(out, strings.TrimSpace(cur.String()))
	}
	return out
}
