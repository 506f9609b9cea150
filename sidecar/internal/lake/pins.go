package lake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Pinned reads. A pinned fork reads each ancestor namespace of an isolated lake at a DuckLake
// snapshot recorded in dataenv.fork_lake_pins: the ancestor is attached with SNAPSHOT_VERSION, so
// the fork's defer views (stored in the fork's own catalog, reading the ancestor's alias), its
// jobs, a materialize that seeds from the parent and its members' DuckDB script (the same attach
// options) all read that snapshot. A fork without pins of its own reads an ancestor namespace at
// the pin of the nearest fork of its chain that has one, so a sub-fork sees the ancestors beyond
// its parent as its parent sees them; its parent's own namespace it reads live unless pinned
// itself.
//
// The snapshot is read from the ancestor's catalog (ducklake_snapshot, the table DuckLake commits
// every snapshot to), as the fork's role, under the namespace's lake_pins lock that
// dataenv.maintain_lake holds while it decides what to expire, so a pin can never point at a
// snapshot being expired.

// Pin is a recorded pin of a fork's deferred reads of a lake.
type Pin struct {
	Lake string `json:"lake"`
	// Ancestors are the workspaces of the namespace (one, or a shared fork and its parent).
	Ancestors  []string `json:"ancestors"`
	SnapshotID int64    `json:"snapshot_id"`
	// Inherited is true when the snapshot is the fork's parent's pin of that namespace.
	Inherited bool `json:"inherited,omitempty"`
}

const pinsOfSQL = `SELECT fork, ancestor, snapshot_id FROM dataenv.fork_lake_pins WHERE lake = $1 AND fork = ANY($2)`

// readPins is the pin of each ancestor workspace's namespace of lake that the first of chain
// (nearest first) reads at: its own, else the nearest fork's of the chain.
func readPins(ctx context.Context, q control.Querier, lake string, chain []string) (map[string]int64, error) {
	rows, err := q.Query(ctx, pinsOfSQL, lake, chain)
	if err != nil {
		return nil, fmt.Errorf("read the lake pins: %w", err)
	}
	type row struct {
		fork, ancestor string
		snap           int64
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.fork, &x.ancestor, &x.snap)
	})
	if err != nil {
		return nil, fmt.Errorf("read the lake pins: %w", err)
	}
	out := map[string]int64{}
	depth := map[string]int{}
	for _, x := range list {
		d := slices.Index(chain, x.fork)
		if old, ok := depth[x.ancestor]; !ok || d < old {
			depth[x.ancestor], out[x.ancestor] = d, x.snap
		}
	}
	return out, nil
}

// pinOf is the pin of node n in pins, if any.
func (n *ancestorNode) pinOf(pins map[string]int64) (int64, bool) {
	for _, w := range n.Workspaces {
		if s, ok := pins[w]; ok {
			return s, true
		}
	}
	return 0, false
}

// applyPins attaches each pinned node at its snapshot and lists the tables it has there (the
// defer views of a pinned node are made only for those).
func (res *resolution) applyPins(ctx context.Context, lake string, nodes []*ancestorNode) error {
	chain := []string{res.ws.ID}
	for _, a := range res.ws.Ancestors {
		chain = append(chain, a.ID)
	}
	pins, err := readPins(ctx, res.r.Control, lake, chain)
	if err != nil || len(pins) == 0 {
		return err
	}
	for _, n := range nodes {
		snap, ok := n.pinOf(pins)
		if !ok {
			continue
		}
		tables, err := res.tablesAt(ctx, n.NS, snap)
		if err != nil {
			return fmt.Errorf("lake %q: the pinned snapshot %d of workspace %q: %w", lake, snap, n.Workspaces[0], err)
		}
		n.Pin, n.AtPin = &snap, tables
	}
	return nil
}

// tablesAtSQL lists the tables of schema main at a snapshot, or nothing when the snapshot is gone
// (the second column says whether it exists).
const tablesAtSQL = `
SELECT t.table_name, true FROM %[1]s.ducklake_table t JOIN %[1]s.ducklake_schema s ON s.schema_id = t.schema_id
 WHERE s.schema_name = 'main' AND s.begin_snapshot <= $1 AND (s.end_snapshot IS NULL OR s.end_snapshot > $1)
   AND t.begin_snapshot <= $1 AND (t.end_snapshot IS NULL OR t.end_snapshot > $1)
   AND EXISTS (SELECT FROM %[1]s.ducklake_snapshot x WHERE x.snapshot_id = $1)
UNION ALL
SELECT NULL, EXISTS (SELECT FROM %[1]s.ducklake_snapshot x WHERE x.snapshot_id = $1)`

// tablesAt reads the tables of ns at snapshot snap, as the workspace's role (which may read the
// ancestors' namespaces it defers to).
func (res *resolution) tablesAt(ctx context.Context, ns Namespace, snap int64) (map[string]bool, error) {
	conn, err := res.r.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, res.ws.ID, ns.Lake.CatalogDatabase)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, fmt.Sprintf(tablesAtSQL, pgx.Identifier{ns.SchemaName()}.Sanitize()), snap)
	if err != nil {
		return nil, fmt.Errorf("read its tables: %w", err)
	}
	out := map[string]bool{}
	exists := false
	for rows.Next() {
		var name *string
		var ok bool
		if err := rows.Scan(&name, &ok); err != nil {
			return nil, err
		}
		if name != nil {
			out[*name] = true
		} else {
			exists = ok
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !exists {
		return nil, request.Refusef("the snapshot no longer exists (expired outside dataenv.maintain_lake?); SELECT dataenv.repin_fork(%s) pins the current one",
			Literal(res.ws.ID))
	}
	return out, nil
}

// currentSnapshot is the latest snapshot of ns, read as the workspace's role.
func (res *resolution) currentSnapshot(ctx context.Context, ns Namespace) (int64, error) {
	conn, err := res.r.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, res.ws.ID, ns.Lake.CatalogDatabase)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var snap *int64
	q := fmt.Sprintf(`SELECT max(snapshot_id) FROM %s.ducklake_snapshot`, pgx.Identifier{ns.SchemaName()}.Sanitize())
	if err := conn.QueryRow(ctx, q).Scan(&snap); err != nil {
		return 0, fmt.Errorf("read the current snapshot: %w", err)
	}
	if snap == nil {
		return 0, errors.New("read the current snapshot: the catalog has none")
	}
	return *snap, nil
}

// pinLockKey is the resource of the lake_pins lock of a namespace.
func pinLockKey(ns Namespace) string { return strings.ReplaceAll(ns.Key(), "\x00", "/") }

const (
	upsertPinSQL = `
INSERT INTO dataenv.fork_lake_pins (fork, lake, ancestor, snapshot_id) VALUES ($1, $2, $3, $4)
ON CONFLICT (fork, lake, ancestor) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id, pinned_at = now()`
	deleteStalePinsSQL = `DELETE FROM dataenv.fork_lake_pins WHERE fork = $1 AND NOT ((lake || '/' || ancestor) = ANY($2))`
	forkPinsSQL        = `SELECT lake, ancestor, snapshot_id FROM dataenv.fork_lake_pins WHERE fork = $1 ORDER BY 1, 3, 2`
)

// PinFork pins fork's deferred reads of each isolated lake: every ancestor namespace it defers to
// at the pin of the fork's parent chain where there is one (Inherited), else at its current
// snapshot. Pins of namespaces it no longer defers to are removed. With keep, a fork that has
// pins already keeps them (a create_fork that runs again after an interruption). The caller
// holds the fork's workspace lock.
func (r *Resolver) PinFork(ctx context.Context, fork string, keep bool, rep request.Reporter) ([]Pin, error) {
	c, err := r.chain(ctx, fork)
	if err != nil {
		return nil, err
	}
	if keep {
		if pins, err := r.ForkPins(ctx, fork); err != nil || len(pins) > 0 {
			return pins, err
		}
	}
	ws := c.Workspace
	res := r.newResolution(c, nil, rep)
	defer res.plan.Close()
	lakes := res.lakes
	ancestors := make([]string, 0, len(ws.Ancestors))
	for _, a := range ws.Ancestors {
		ancestors = append(ancestors, a.ID)
	}
	names := make([]string, 0, len(lakes[ws.ID]))
	for name := range lakes[ws.ID] {
		names = append(names, name)
	}
	sort.Strings(names)
	out := []Pin{}
	var keys []string
	for _, name := range names {
		if !Isolated(*ws, lakes[ws.ID][name]) || len(ws.Ancestors) == 0 {
			continue
		}
		pins, err := res.pinLake(ctx, name, ancestors)
		if err != nil {
			return nil, err
		}
		for _, p := range pins {
			for _, a := range p.Ancestors {
				keys = append(keys, p.Lake+"/"+a)
			}
		}
		out = append(out, pins...)
	}
	if keys == nil {
		keys = []string{}
	}
	if _, err := r.Control.Exec(ctx, deleteStalePinsSQL, fork, keys); err != nil {
		return nil, request.Retryable(fmt.Errorf("remove stale pins of %q: %w", fork, err))
	}
	return out, nil
}

// pinLake pins the ancestor namespaces of one lake (parents: the fork's ancestors, nearest first).
func (res *resolution) pinLake(ctx context.Context, lake string, parents []string) ([]Pin, error) {
	nodes, err := res.ancestorNodes(ctx, lake)
	if err != nil {
		return nil, err
	}
	inherited, err := readPins(ctx, res.r.Control, lake, parents)
	if err != nil {
		return nil, request.Retryable(err)
	}
	var out []Pin
	for _, n := range nodes {
		p := Pin{Lake: lake, Ancestors: n.Workspaces}
		err := lock.With(ctx, res.r.Control, lock.ClassLakePins, pinLockKey(n.NS), nil, func(ctx context.Context, held *lock.Held) error {
			var ok bool
			if p.SnapshotID, ok = n.pinOf(inherited); ok {
				p.Inherited = true
			} else if p.SnapshotID, err = res.currentSnapshot(ctx, n.NS); err != nil {
				return fmt.Errorf("lake %q of workspace %q: %w", lake, n.Workspaces[0], err)
			}
			for _, a := range n.Workspaces {
				if _, err := held.Conn().Exec(ctx, upsertPinSQL, res.ws.ID, lake, a, p.SnapshotID); err != nil {
					return fmt.Errorf("record the pin: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		request.Reportf(ctx, res.rep, "lake "+lake, "pinned", "%s at snapshot %d", n.Workspaces[0], p.SnapshotID)
		out = append(out, p)
	}
	return out, nil
}

// ForkPins are the pins recorded for fork, one per lake and ancestor namespace.
func (r *Resolver) ForkPins(ctx context.Context, fork string) ([]Pin, error) {
	rows, err := r.Control.Query(ctx, forkPinsSQL, fork)
	if err != nil {
		return nil, request.Retryable(err)
	}
	type row struct {
		lake, ancestor string
		snap           int64
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.lake, &x.ancestor, &x.snap)
	})
	if err != nil {
		return nil, request.Retryable(err)
	}
	out := []Pin{}
	for _, x := range list {
		if n := len(out); n > 0 && out[n-1].Lake == x.lake && out[n-1].SnapshotID == x.snap {
			out[n-1].Ancestors = append(out[n-1].Ancestors, x.ancestor)
			continue
		}
		out = append(out, Pin{Lake: x.lake, Ancestors: []string{x.ancestor}, SnapshotID: x.snap})
	}
	return out, nil
}

// Maintenance is what dataenv.maintain_lake decides for a workspace's own namespace of a lake.
type Maintenance struct {
	Workspace string `json:"workspace"`
	Lake      string `json:"lake"`
	// Snapshots are those the catalog had; Current the latest (never expired).
	Snapshots []int64 `json:"snapshots"`
	Current   int64   `json:"current"`
	// Pinned are the snapshots live forks pin (kept); Expire the others but Current.
	Pinned []int64 `json:"pinned"`
	Expire []int64 `json:"expire"`
	// Bootstrapped is false when the namespace has no DuckLake catalog yet (nothing to do).
	Bootstrapped bool `json:"bootstrapped"`
}

const pinnedSnapshotsSQL = `
SELECT DISTINCT p.snapshot_id FROM dataenv.fork_lake_pins p JOIN dataenv.workspaces w ON w.id = p.fork
 WHERE p.lake = $1 AND p.ancestor = $2 ORDER BY 1`

// Maintain runs fn holding the lake_pins lock of workspace's own namespace of lake, with what to
// expire there: every snapshot but the current one and those a live fork pins. No pin can be
// taken of the namespace meanwhile, and a pin taken after is of a snapshot at least as new as the
// current one, which is kept.
func (r *Resolver) Maintain(ctx context.Context, workspace, lakeName string, rep request.Reporter, fn func(ctx context.Context, m *Maintenance) error) error {
	ws, err := control.ReadWorkspace(ctx, r.Control, workspace)
	if err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return request.Refusef("no workspace named %q", workspace)
		}
		return request.Retryable(err)
	}
	lakes, err := control.ReadLakes(ctx, r.Control, []string{ws.ID}, lakeName)
	if err != nil {
		return request.Retryable(err)
	}
	l, ok := lakes[ws.ID][lakeName]
	if !ok {
		return request.Refusef("workspace %q has no lake named %q", workspace, lakeName)
	}
	if ws.IsFork && !Isolated(*ws, l) {
		return request.Refusef("lake %q of workspace %q is shared with its parent: maintain it in the workspace whose namespace it is", lakeName, workspace)
	}
	res := &resolution{r: r, ws: ws, storages: map[string]control.Storage{}, cats: newCatalogs(r.Clusters, ws.ID),
		plan: &Plan{}, rep: rep, s3: map[string]control.Storage{}}
	res.plan.catalogs = res.cats
	defer res.plan.Close()
	s, err := res.storage(ctx, l.Storage)
	if err != nil {
		return err
	}
	ns := namespaceOf(ws.ID, ws.IsFork, l, s)
	return lock.With(ctx, r.Control, lock.ClassLakePins, pinLockKey(ns), nil, func(ctx context.Context, held *lock.Held) error {
		m := &Maintenance{Workspace: ws.ID, Lake: lakeName, Snapshots: []int64{}, Pinned: []int64{}, Expire: []int64{}}
		exists, err := res.namespaceExists(ctx, ns)
		if err != nil {
			return request.Retryable(err)
		}
		if exists { // the workspace's role reads its own namespace's catalog
			if exists, err = r.Access.Grant(ctx, ns, ws.ID, AccessWrite, rep); err != nil {
				return err
			}
		}
		if m.Bootstrapped = exists; exists {
			if m.Snapshots, err = res.snapshots(ctx, ns); err != nil {
				return err
			}
			rows, err := held.Conn().Query(ctx, pinnedSnapshotsSQL, lakeName, ws.ID)
			if err != nil {
				return request.Retryable(err)
			}
			if m.Pinned, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
				return request.Retryable(err)
			}
			if n := len(m.Snapshots); n > 0 {
				m.Current = m.Snapshots[n-1]
				for _, s := range m.Snapshots[:n-1] {
					if !slices.Contains(m.Pinned, s) {
						m.Expire = append(m.Expire, s)
					}
				}
			}
		}
		return fn(ctx, m)
	})
}

// snapshots lists the snapshots of ns, oldest first, read as the workspace's role.
func (res *resolution) snapshots(ctx context.Context, ns Namespace) ([]int64, error) {
	conn, err := res.r.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, res.ws.ID, ns.Lake.CatalogDatabase)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, fmt.Sprintf(`SELECT snapshot_id FROM %s.ducklake_snapshot ORDER BY 1`, pgx.Identifier{ns.SchemaName()}.Sanitize()))
	if err != nil {
		return nil, fmt.Errorf("lake %q: read its snapshots: %w", ns.Lake.Name, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// MaintenanceSQL is the job of a maintenance: the lake attached, the snapshots expired (when
// there are any to), then every file scheduled for deletion deleted; the last result lists them.
func MaintenanceSQL(m *Maintenance) string {
	const alias = "__dataenv_maintain"
	stmts := []string{"ATTACH " + Literal(SchemeLake+m.Lake) + " AS " + Ident(alias)}
	if len(m.Expire) > 0 {
		vs := make([]string, len(m.Expire))
		for i, v := range m.Expire {
			vs[i] = fmt.Sprint(v)
		}
		stmts = append(stmts, fmt.Sprintf("CALL ducklake_expire_snapshots(%s, versions => [%s])", Literal(alias), strings.Join(vs, ", ")))
	}
	stmts = append(stmts, fmt.Sprintf("CALL ducklake_cleanup_old_files(%s, cleanup_all => true)", Literal(alias)))
	return strings.Join(stmts, ";\n") + ";"
}
