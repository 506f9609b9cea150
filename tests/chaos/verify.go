package main

import (
	"context"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/names"
)

// finish reads every request's final row: a request not finished now is lost.
func (h *harness) finish(ctx context.Context) {
	h.recs.mu.Lock()
	recs := append([]*record(nil), h.recs.recs...)
	h.recs.mu.Unlock()
	for _, r := range recs {
		row, err := h.read(ctx, r.ID)
		if err != nil {
			h.recs.problem(r.ID, probLost, "row unreadable: %v", err)
			continue
		}
		h.recs.mu.Lock()
		r.Row = row
		h.recs.mu.Unlock()
		if !row.final() {
			h.recs.problem(r.ID, probLost, "still %s at attempt %d when the run ended", row.Status, row.Attempts)
		}
	}
}

// leftover is something found after the run that should not exist.
type leftover struct {
	What  string
	Owner uuid.UUID // the request responsible, when known
}

// leftovers lists what the run left behind: staging databases, fork databases, schemas and data
// files, databases and roles of the workload that still exist, and control records of any of
// them. Each is attributed to the request that made it, when the name says which.
func (h *harness) leftovers(ctx context.Context) ([]leftover, error) {
	var out []leftover
	add := func(what, name string) {
		out = append(out, leftover{What: what + " " + name, Owner: h.ownerOf(name)})
	}
	queries := []struct {
		db, what, sql string
	}{
		{"postgres", "staging database", `SELECT datname FROM pg_database WHERE datname LIKE 'dataenv\_tmp\_%'`},
		{"postgres", "fork database", `SELECT datname FROM pg_database WHERE datname LIKE 'dataenv\_fork\_%'`},
		{"postgres", "workload database", `SELECT datname FROM pg_database WHERE datname LIKE 'chaos\_db\_%'`},
		{"postgres", "datatable role", `SELECT rolname FROM pg_roles WHERE rolname LIKE 'chaos\_role\_%'`},
		{catalogDB, "fork metadata schema", `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'dataenv\_fork\_%'`},
		// The parent's schema template (schema_only forks are copies of it) belongs to prod.
		{controlDB, "managed_databases record", `SELECT name FROM dataenv.managed_databases WHERE name <> '` + parentDB + `'
			AND name NOT IN (SELECT database FROM dataenv.schema_templates WHERE workspace = 'prod')`},
		{controlDB, "schema template database", `SELECT datname FROM pg_database WHERE datname LIKE 'dataenv\_tpl\_%'
			AND datname NOT IN (SELECT database FROM dataenv.schema_templates WHERE workspace = 'prod')`},
		{controlDB, "schema_templates row", `SELECT database FROM dataenv.schema_templates WHERE workspace <> 'prod'
			OR NOT EXISTS (SELECT FROM dataenv.datatables d WHERE d.workspace = 'prod' AND d.name = schema_templates.datatable)`},
		// A ready template or spare is copied by the next fork: its database must exist (both
		// clusters are the same server).
		{controlDB, "ready schema_templates row naming a database that is gone", `SELECT database FROM dataenv.schema_templates
			WHERE state = 'ready' AND database NOT IN (SELECT datname FROM pg_database)`},
		{controlDB, "datatable_roles record", `SELECT role FROM dataenv.datatable_roles`},
		{controlDB, "fork_copies row", `SELECT database FROM dataenv.fork_copies`},
		{controlDB, "fork_lake_namespaces row", `SELECT metadata_schema FROM dataenv.fork_lake_namespaces`},
		{controlDB, "workspace", `SELECT id FROM dataenv.workspaces WHERE id <> 'prod'`},
		{controlDB, "workspace_roles record of", `SELECT workspace FROM dataenv.workspace_roles WHERE workspace <> 'prod'`},
		// Both clusters are the same server: its roles are every workspace role of the run.
		{controlDB, "workspace role", `SELECT rolname FROM pg_roles WHERE rolname LIKE 'dataenv\_ws\_%'
			AND rolname NOT IN (SELECT role FROM dataenv.workspace_roles WHERE workspace = 'prod')`},
		// A spare's role goes with its spare, or became a fork's workspace role.
		{controlDB, "spare role", `SELECT rolname FROM pg_roles WHERE rolname LIKE 'dataenv\_spare\_%'
			AND rolname NOT IN (SELECT role FROM dataenv.schema_templates WHERE workspace = 'prod' AND role IS NOT NULL)`},
	}
	for _, q := range queries {
		found, err := h.names(ctx, q.db, q.sql)
		if err != nil {
			return nil, err
		}
		for _, n := range found {
			add(q.what, n)
		}
	}
	forks := filepath.Join(h.storage, "__dataenv_forks")
	err := filepath.WalkDir(forks, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(forks, path)
		seg, _, _ := strings.Cut(rel, string(filepath.Separator))
		out = append(out, leftover{What: "fork data file " + rel, Owner: h.ownerOf(seg)})
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return out, nil
}

func (h *harness) names(ctx context.Context, db, sql string) ([]string, error) {
	var out []string
	err := retry(ctx, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, h.pg.DSN(db))
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return out, err
}

// ownerOf maps a name the run created (a workload name, a staging database, a fork's database,
// schema or data segment) to the request that created it.
func (h *harness) ownerOf(name string) uuid.UUID {
	if hx, ok := strings.CutPrefix(name, "dataenv_tmp_"); ok {
		if b, err := hex.DecodeString(hx); err == nil && len(b) == 16 {
			return uuid.UUID(b)
		}
	}
	if id, ok, _ := h.recs.owner(name); ok {
		return id
	}
	h.recs.mu.Lock()
	defer h.recs.mu.Unlock()
	for fork, id := range h.recs.owners {
		if name == names.ForkDatabase(fork, "crm") || name == names.ForkLakeSchema(fork, "main") || name == names.ForkDataSegment(fork) {
			return id
		}
	}
	return uuid.Nil
}

// judgeLeftovers files each leftover under the request that made it: a workload database or
// role that exists after its drop succeeded was done twice; anything else was left behind.
func (h *harness) judgeLeftovers(found []leftover) (unowned []string) {
	for _, l := range found {
		if l.Owner == uuid.Nil {
			unowned = append(unowned, l.What)
			continue
		}
		class := probLeftover
		name := l.What[strings.LastIndexByte(l.What, ' ')+1:]
		if _, _, undone := h.recs.owner(name); undone && (strings.HasPrefix(l.What, "workload database") || strings.HasPrefix(l.What, "datatable role")) {
			class = probDuplicated
		}
		h.recs.problem(l.Owner, class, "%s", l.What)
	}
	return unowned
}
