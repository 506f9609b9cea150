package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/names"
)

// Problem classes of a request.
const (
	probLost       = "lost"       // not finished when the run ended
	probFailed     = "failed"     // failed (every request of the workload is meant to succeed)
	probDuplicated = "duplicated" // an effect exists more often than once, or again after its undo
	probMismatch   = "mismatch"   // an effect missing or not matching its control record
	probLeftover   = "leftover"   // something left behind (staging database, fork leftovers)
)

type problem struct {
	Class  string
	Detail string
}

// record is one request of the workload.
type record struct {
	ID       uuid.UUID
	Kind     string
	Lane     string
	Expect   []string // acceptable final statuses
	Row      reqRow
	Problems []problem
}

// tracker holds every request of the run and what the workload knows about names.
type tracker struct {
	mu     sync.Mutex
	recs   []*record
	byID   map[uuid.UUID]*record
	owners map[string]uuid.UUID // a database, role or fork name -> the request that created it
	undone map[string]bool      // names whose drop succeeded
}

func (t *tracker) add(r *record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID == nil {
		t.byID, t.owners, t.undone = map[uuid.UUID]*record{}, map[string]uuid.UUID{}, map[string]bool{}
	}
	t.recs = append(t.recs, r)
	t.byID[r.ID] = r
}

func (t *tracker) problem(id uuid.UUID, class, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		r.Problems = append(r.Problems, problem{Class: class, Detail: fmt.Sprintf(format, args...)})
	}
}

func (t *tracker) own(name string, id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.owners[name] = id
	delete(t.undone, name)
}

func (t *tracker) undo(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.undone[name] = true
}

func (t *tracker) owner(name string) (uuid.UUID, bool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.owners[name]
	return id, ok, t.undone[name]
}

// step makes one request of a lane and waits for it. ok reports a final status in expect (by
// default succeeded); any other final status is a failure by a fault.
func (h *harness) step(ctx context.Context, lane, kind string, args map[string]any, expect ...string) (*record, bool) {
	if len(expect) == 0 {
		expect = []string{"succeeded"}
	}
	id, err := h.issue(ctx, kind, args)
	if err != nil {
		h.opts.Logf("lane %s: %v", lane, err)
		return nil, false
	}
	r := &record{ID: id, Kind: kind, Lane: lane, Expect: expect}
	h.recs.add(r)
	row, err := h.await(ctx, id)
	h.recs.mu.Lock()
	r.Row = row
	h.recs.mu.Unlock()
	if err != nil || !row.final() {
		return r, false // judged at the end: lost unless it finished meanwhile
	}
	if !slices.Contains(expect, row.Status) {
		h.recs.problem(id, probFailed, "%s at attempt %d: %s", row.Status, row.Attempts, row.errText())
		return r, false
	}
	return r, true
}

// stopped reports whether the lanes should start no new chain.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// lanes are the workload: each runs chains of requests until stop closes, finishing the chain
// it is in.
func (h *harness) lanes() map[string]func(ctx context.Context, stop <-chan struct{}) {
	return map[string]func(ctx context.Context, stop <-chan struct{}){
		"databases-1": func(ctx context.Context, stop <-chan struct{}) { h.databaseLane(ctx, stop, "databases-1") },
		"databases-2": func(ctx context.Context, stop <-chan struct{}) { h.databaseLane(ctx, stop, "databases-2") },
		"roles":       h.roleLane,
		"setup":       h.setupLane,
		"forks-1":     func(ctx context.Context, stop <-chan struct{}) { h.forkLane(ctx, stop, "forks-1", 0) },
		"forks-2":     func(ctx context.Context, stop <-chan struct{}) { h.forkLane(ctx, stop, "forks-2", 1) },
		"cancel":      h.cancelLane,
	}
}

func (h *harness) databaseLane(ctx context.Context, stop <-chan struct{}, lane string) {
	for i := 0; !stopped(stop); i++ {
		name := fmt.Sprintf("chaos_db_%s_%d", lane[len(lane)-1:], i)
		args := map[string]any{"cluster": extCluster, "name": name}
		c, ok := h.step(ctx, lane, "create_database", args)
		if c == nil {
			return
		}
		h.recs.own(name, c.ID)
		if !ok {
			continue
		}
		h.checkDatabase(ctx, c.ID, c.ID, name, true)
		d, ok := h.step(ctx, lane, "drop_database", args)
		if d == nil {
			return
		}
		if ok {
			h.recs.undo(name)
			h.checkDatabase(ctx, d.ID, c.ID, name, false)
		}
	}
}

// checkDatabase checks, right after the request id succeeded, that the database created by
// request owner exists (once, with its marker and its record) or is gone with its record.
func (h *harness) checkDatabase(ctx context.Context, id, owner uuid.UUID, name string, exists bool) {
	var dbs int
	marker := fmt.Sprintf("%s; database; request %s", names.Marker, owner)
	if err := h.queryDB(ctx, "postgres", `SELECT count(*) FILTER (WHERE shobj_description(oid, 'pg_database') = $2)::int * 10 + count(*)::int
		FROM pg_database WHERE datname = $1`, []any{name, marker}, &dbs); err != nil {
		return
	}
	var recs int
	if err := h.queryDB(ctx, controlDB, `SELECT count(*)::int FROM dataenv.managed_databases WHERE cluster = $1 AND name = $2 AND created_by_request = $3`,
		[]any{extCluster, name, owner}, &recs); err != nil {
		return
	}
	switch {
	case exists && (dbs != 11 || recs != 1):
		h.recs.problem(id, probMismatch, "database %s after its create: %d databases (%d marked), %d records", name, dbs%10, dbs/10, recs)
	case !exists && (dbs != 0 || recs != 0):
		h.recs.problem(id, probMismatch, "database %s after its drop: %d databases, %d records", name, dbs%10, recs)
	}
}

func (h *harness) roleLane(ctx context.Context, stop <-chan struct{}) {
	const lane = "roles"
	for i := 0; !stopped(stop); i++ {
		name := fmt.Sprintf("chaos_role_%d", i)
		args := map[string]any{"cluster": extCluster, "role": name}
		c, ok := h.step(ctx, lane, "create_datatable_role", args)
		if c == nil {
			return
		}
		h.recs.own(name, c.ID)
		if !ok {
			continue
		}
		h.checkRole(ctx, c.ID, c.ID, name, true)
		d, ok := h.step(ctx, lane, "drop_datatable_role", args)
		if d == nil {
			return
		}
		if ok {
			h.recs.undo(name)
			h.checkRole(ctx, d.ID, c.ID, name, false)
		}
	}
}

func (h *harness) checkRole(ctx context.Context, id, owner uuid.UUID, name string, exists bool) {
	var roles, recs int
	marker := fmt.Sprintf("%s; datatable role; request %s", names.Marker, owner)
	if err := h.queryDB(ctx, "postgres", `SELECT count(*) FILTER (WHERE shobj_description(oid, 'pg_authid') = $2)::int * 10 + count(*)::int
		FROM pg_roles WHERE rolname = $1`, []any{name, marker}, &roles); err != nil {
		return
	}
	if err := h.queryDB(ctx, controlDB, `SELECT count(*)::int FROM dataenv.datatable_roles WHERE cluster = $1 AND role = $2 AND created_by_request = $3`,
		[]any{extCluster, name, owner}, &recs); err != nil {
		return
	}
	switch {
	case exists && (roles != 11 || recs != 1):
		h.recs.problem(id, probMismatch, "role %s after its create: %d roles (%d marked), %d records", name, roles%10, roles/10, recs)
	case !exists && (roles != 0 || recs != 0):
		h.recs.problem(id, probMismatch, "role %s after its drop: %d roles, %d records", name, roles%10, recs)
	}
}

func (h *harness) setupLane(ctx context.Context, stop <-chan struct{}) {
	for !stopped(stop) {
		r, ok := h.step(ctx, "setup", "setup_cluster", map[string]any{"cluster": extCluster})
		if r == nil {
			return
		}
		if ok {
			var n int
			if err := h.queryDB(ctx, "postgres", `SELECT count(*)::int FROM pg_roles WHERE rolname IN ($1, $2)
				AND shobj_description(oid, 'pg_authid') = $3`, []any{appRole, replRole, names.Marker + "; managed role"}, &n); err == nil && n != 2 {
				h.recs.problem(r.ID, probMismatch, "%d of the 2 managed roles exist with their marker", n)
			}
			var setUp bool
			if err := h.queryDB(ctx, controlDB, `SELECT set_up_for IS NOT NULL FROM dataenv.clusters WHERE name = $1`, []any{extCluster}, &setUp); err == nil && !setUp {
				h.recs.problem(r.ID, probMismatch, "set_up_for not recorded")
			}
		}
		select {
		case <-stop:
		case <-time.After(300 * time.Millisecond):
		}
	}
}

var forkModes = []string{"keep_original", "schema_only", "full_copy"}

const attachMain = "ATTACH 'ducklake://main' AS dl;\n"

func (h *harness) forkLane(ctx context.Context, stop <-chan struct{}, lane string, n int) {
	for i := 0; !stopped(stop); i++ {
		fork := fmt.Sprintf("chaos_f%d_%d", n, i)
		mode := forkModes[(i+n)%len(forkModes)]
		if mode == "schema_only" && i%2 == 0 {
			// The parent's schema changes before every other schema_only fork: its copy is then
			// restored from a dump, and its request rebuilds the template and its spare.
			if err := h.execDB(ctx, parentDB, `SET ROLE `+appRole, fmt.Sprintf(`COMMENT ON TABLE customers IS '%s'`, fork)); err != nil {
				h.opts.Logf("lane %s: change the parent's schema: %v", lane, err)
			}
		}
		c, ok := h.step(ctx, lane, "create_fork", map[string]any{"parent": "prod", "fork": fork,
			"datatables": map[string]string{"crm": mode}, "shared_lakes": []string{}})
		if c == nil {
			return
		}
		h.recs.own(fork, c.ID)
		if !ok {
			continue
		}
		h.checkFork(ctx, c.ID, fork, mode)
		if !h.forkJobs(ctx, lane, fork) {
			return
		}
		if mode == "schema_only" { // a copy whose role exists: it takes the spare and re-owns it
			rs, ok := h.step(ctx, lane, "reset_fork", map[string]any{"fork": fork})
			if rs == nil {
				return
			}
			if ok {
				h.checkFork(ctx, rs.ID, fork, mode)
			}
		}
		if i%3 == 0 {
			child := fork + "_c"
			cc, _ := h.step(ctx, lane, "create_fork", map[string]any{"parent": fork, "fork": child,
				"datatables": map[string]string{"crm": "keep_original"}, "shared_lakes": []string{}})
			if cc == nil {
				return
			}
			h.recs.own(child, cc.ID)
		}
		if mode != "keep_original" { // again: siblings came and went while this fork lived
			h.checkCopyShutOut(ctx, c.ID, fork, names.ForkDatabase(fork, "crm"))
		}
		d, ok := h.step(ctx, lane, "drop_fork", map[string]any{"fork": fork, "cascade": true})
		if d == nil {
			return
		}
		if ok {
			h.recs.undo(fork)
			h.recs.undo(fork + "_c")
			h.checkForkGone(ctx, d.ID, fork)
		}
	}
}

// forkJobs runs a read that defers to the parent's lake table and two appends to the fork's own
// table, then checks that each append landed exactly once. It reports whether to go on.
func (h *harness) forkJobs(ctx context.Context, lane, fork string) bool {
	r, ok := h.step(ctx, lane, "run", map[string]any{"workspace": fork, "sql": attachMain + "SELECT count(*) AS n FROM dl.orders"})
	if r == nil {
		return false
	}
	if ok {
		if got := firstCell(r.Row.Result); got != strconv.Itoa(lakeRows) {
			h.recs.problem(r.ID, probMismatch, "the fork reads %s rows of the parent's orders, want %d", got, lakeRows)
		}
	}
	appended := 0
	for range 2 {
		m, ok := h.step(ctx, lane, "materialize", map[string]any{"workspace": fork, "target": "ducklake://main/t",
			"query": "SELECT range AS i FROM range(7)", "strategy": "append"})
		if m == nil {
			return false
		}
		if ok {
			appended++
		}
	}
	r, ok = h.step(ctx, lane, "run", map[string]any{"workspace": fork, "sql": attachMain + "SELECT count(*) AS n FROM dl.t"})
	if r == nil {
		return false
	}
	if ok && appended > 0 {
		got, _ := strconv.Atoi(firstCell(r.Row.Result))
		switch {
		case got > 7*appended:
			h.recs.problem(r.ID, probDuplicated, "fork %s table t has %d rows after %d appends of 7", fork, got, appended)
		case got < 7*appended:
			h.recs.problem(r.ID, probMismatch, "fork %s table t has %d rows after %d appends of 7", fork, got, appended)
		}
	}
	return true
}

// firstCell is the first value of a job result's first row, as text.
func firstCell(result []byte) string {
	var res struct {
		Rows [][]json.RawMessage `json:"rows"`
	}
	if json.Unmarshal(result, &res) != nil || len(res.Rows) == 0 || len(res.Rows[0]) == 0 {
		return "?"
	}
	s := string(res.Rows[0][0])
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// checkFork checks a fork right after its create_fork succeeded: its workspace, its datatable
// entry, and for copies their database, registry row and rows.
func (h *harness) checkFork(ctx context.Context, id uuid.UUID, fork, mode string) {
	var db string
	if err := h.queryDB(ctx, controlDB, `SELECT database FROM dataenv.datatables WHERE workspace = $1 AND name = 'crm'`, []any{fork}, &db); err != nil {
		h.recs.problem(id, probMismatch, "fork %s has no crm datatable: %v", fork, err)
		return
	}
	if mode == "keep_original" {
		if db != parentDB {
			h.recs.problem(id, probMismatch, "keep_original fork %s names %s, not the parent's database", fork, db)
		}
		return
	}
	want := names.ForkDatabase(fork, "crm")
	var ready int
	if err := h.queryDB(ctx, controlDB, `SELECT count(*)::int FROM dataenv.fork_copies WHERE workspace = $1 AND database = $2 AND state = 'ready'`,
		[]any{fork, want}, &ready); err != nil || db != want || ready != 1 {
		h.recs.problem(id, probMismatch, "fork %s: datatable names %s (want %s), %d ready copies", fork, db, want, ready)
		return
	}
	h.checkCopyShutOut(ctx, id, fork, want)
	rows := parentRows
	if mode == "schema_only" {
		rows = 0
	}
	var got int
	if err := h.queryDB(ctx, want, `SELECT count(*)::int FROM customers`, nil, &got); err != nil || got != rows {
		h.recs.problem(id, probMismatch, "%s fork %s: customers has %d rows (want %d): %v", mode, fork, got, rows, err)
	}
}

// checkCopyShutOut checks that a fork's copy gives no other workspace's role anything (a sibling
// keep_original fork's role holds grants in the parent: a copy must not carry them).
func (h *harness) checkCopyShutOut(ctx context.Context, id uuid.UUID, fork, db string) {
	var own string
	if err := h.queryDB(ctx, controlDB, `SELECT role FROM dataenv.workspace_roles WHERE cluster = $1 AND workspace = $2`,
		[]any{extCluster, fork}, &own); err != nil {
		h.recs.problem(id, probMismatch, "fork %s has no workspace role on %s: %v", fork, extCluster, err)
		return
	}
	var foreign string
	if err := h.queryDB(ctx, db, `SELECT coalesce(string_agg(DISTINCT r.rolname, ', '), '') FROM pg_shdepend s JOIN pg_roles r ON r.oid = s.refobjid
		WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND s.deptype IN ('a', 'o')
		  AND starts_with(r.rolname, $1) AND r.rolname <> $2`, []any{names.WorkspaceRolePrefix, own}, &foreign); err != nil {
		h.recs.problem(id, probMismatch, "fork %s: read the roles of %s: %v", fork, db, err)
		return
	}
	if foreign != "" {
		h.recs.problem(id, probMismatch, "fork %s: its copy %s gives other workspaces' roles privileges or objects: %s", fork, db, foreign)
	}
}

// checkForkGone checks right after drop_fork succeeded that nothing of the fork (or its child)
// is left in the control database.
func (h *harness) checkForkGone(ctx context.Context, id uuid.UUID, fork string) {
	var left int
	if err := h.queryDB(ctx, controlDB, `SELECT (SELECT count(*) FROM dataenv.workspaces WHERE id IN ($1, $1 || '_c'))
		+ (SELECT count(*) FROM dataenv.fork_copies WHERE workspace IN ($1, $1 || '_c'))
		+ (SELECT count(*) FROM dataenv.fork_lake_namespaces WHERE workspace IN ($1, $1 || '_c'))`, []any{fork}, &left); err != nil {
		return
	}
	if left != 0 {
		h.recs.problem(id, probMismatch, "fork %s after its drop: %d workspace, copy or namespace rows left", fork, left)
	}
}

// cancelLane cancels requests at random moments: a long DuckDB job (running when cancelled, or
// not yet) and a ping that sleeps. Either ends cancelled, or succeeded if it won the race.
func (h *harness) cancelLane(ctx context.Context, stop <-chan struct{}) {
	for i := 0; !stopped(stop); i++ {
		kind, args := "run", map[string]any{"workspace": "prod", "sql": "SELECT count(*) FROM range(20000) a, range(20000) b"}
		if i%2 == 1 {
			kind, args = "ping", map[string]any{"sleep_ms": 800}
		}
		id, err := h.issue(ctx, kind, args)
		if err != nil {
			return
		}
		r := &record{ID: id, Kind: kind, Lane: "cancel", Expect: []string{"cancelled", "succeeded"}}
		h.recs.add(r)
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.randDuration(0, 1500*time.Millisecond)):
		}
		if err := retry(ctx, func(ctx context.Context) error {
			_, err := h.pool.Exec(ctx, `SELECT dataenv.cancel($1)`, id)
			return err
		}); err != nil {
			return
		}
		row, err := h.await(ctx, id)
		h.recs.mu.Lock()
		r.Row = row
		h.recs.mu.Unlock()
		if err != nil {
			return
		}
		if !slices.Contains(r.Expect, row.Status) {
			h.recs.problem(id, probFailed, "%s at attempt %d: %s", row.Status, row.Attempts, row.errText())
		}
	}
}
