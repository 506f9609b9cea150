package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// ToolsReport says what PrepareTools did.
type ToolsReport struct {
	Lakes    []string          `json:"lakes"`
	Attaches []lake.ToolAttach `json:"attaches"`
	Notes    []string          `json:"notes,omitempty"`
}

const saveToolScriptSQL = `
INSERT INTO dataenv.workspace_tool_scripts (workspace, script, settings) VALUES ($1, $2, $3)
ON CONFLICT (workspace) DO UPDATE SET script = EXCLUDED.script, settings = EXCLUDED.settings, prepared_at = now()`

// PrepareTools makes workspace's lakes usable from its members' own DuckDB sessions: a job
// attaches every lake of the workspace under its name (so each isolated fork namespace is
// registered, its schema made, the role granted, DuckLake's catalog bootstrapped and the defer
// views made, exactly as a job's attach does), then the session script of dataenv.duckdb_script
// is saved (without secrets: placeholders). A workspace without lakes gets a script that says so.
// The caller holds the workspace's lock (lock.Workspace).
func (h *Handlers) PrepareTools(ctx context.Context, workspace string, rep request.Reporter) (*ToolsReport, error) {
	lakes, err := control.ReadLakes(ctx, h.cfg.Control, []string{workspace}, "")
	if err != nil {
		return nil, request.Retryable(err)
	}
	out := &ToolsReport{Lakes: []string{}, Attaches: []lake.ToolAttach{}}
	for name := range lakes[workspace] {
		out.Lakes = append(out.Lakes, name)
	}
	sort.Strings(out.Lakes)
	script := fmt.Sprintf("-- dataenv: workspace %s has no lakes.\n", workspace)
	settings := lake.ToolSettings{Extensions: []string{}, Secrets: []lake.ToolSecret{}, Attaches: []lake.ToolAttach{}}
	if len(out.Lakes) > 0 {
		// The workspace's memory, thread and disk limits apply: preparing is a job on the
		// workspace's runner. Its timeout is never shorter than the installation's: a short
		// timeout set for users' jobs must not fail dataenv's own preparation (a create_fork).
		lim, err := h.limits(ctx, workspace, 0)
		if err != nil {
			return nil, err
		}
		if lim.Timeout < h.cfg.Limits.Timeout {
			lim.Timeout = h.cfg.Limits.Timeout
			lim.from[client.LimitTimeout] = "the installation's default (dataenv sidecar --job-timeout), which preparing a workspace always gets"
		}
		plan, err := h.cfg.Resolver.Resolve(ctx, workspace, lake.ToolJobSQL(out.Lakes), nil, rep)
		if err != nil {
			return nil, err
		}
		defer plan.Close()
		if _, err := h.runJob(ctx, plan, lim, []string{plan.SQL}, true, 0); err != nil {
			return nil, fmt.Errorf("prepare the lakes of workspace %q: %w", workspace, err)
		}
		script, settings = plan.ToolScript(workspace), plan.ToolSettings()
		out.Attaches, out.Notes = plan.Tools, plan.Notes
	}
	attaches, err := json.Marshal(settings)
	if err != nil {
		return nil, err
	}
	if _, err := h.cfg.Control.Exec(ctx, saveToolScriptSQL, workspace, script, attaches); err != nil {
		return nil, request.Retryable(fmt.Errorf("save the DuckDB script of workspace %q: %w", workspace, err))
	}
	request.Reportf(ctx, rep, "lakes of "+workspace, "prepared", "%d lake(s), %d attach(es) in the DuckDB script", len(out.Lakes), len(out.Attaches))
	return out, nil
}

// descendantsSQL: the forks below workspace, nearest first, that keep lake isolated and were
// prepared for their members' tools (they have a DuckDB script).
const descendantsSQL = `
SELECT c.workspace
  FROM dataenv.workspace_chain_all c
  JOIN dataenv.workspace_tool_scripts t ON t.workspace = c.workspace
  JOIN dataenv.lakes l ON l.workspace = c.workspace AND l.name = $2 AND l.fork_behavior IS DISTINCT FROM 'shared'
 WHERE c.ancestor = $1 AND c.depth > 0
 ORDER BY c.depth, c.workspace`

// refreshDescendants prepares again, after workspace materialized a table of lake, every fork
// below it that uses the lake isolated: their defer views then read the new table without a job
// in the fork, and their DuckDB scripts attach the namespaces the views read. A failure is a
// note of the materialize, not its failure (the table is written).
func (h *Handlers) refreshDescendants(ctx context.Context, workspace, lakeName string, rep request.Reporter) []string {
	rows, err := h.cfg.Control.Query(ctx, descendantsSQL, workspace, lakeName)
	if err != nil {
		return []string{fmt.Sprintf("the forks of %s were not refreshed: %v", workspace, err)}
	}
	forks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return []string{fmt.Sprintf("the forks of %s were not refreshed: %v", workspace, err)}
	}
	var notes []string
	for _, f := range forks {
		if err := h.refreshFork(ctx, f, rep); err != nil {
			notes = append(notes, fmt.Sprintf("fork %s was not refreshed (its defer views follow at its next job or prepare_connection): %v", f, err))
		}
	}
	return notes
}

// refreshFork prepares fork again under its workspace lock, unless it was dropped meanwhile
// (drop_fork holds the lock while it removes what preparing makes).
func (h *Handlers) refreshFork(ctx context.Context, fork string, rep request.Reporter) error {
	locks, err := h.cfg.WorkspaceLocks.Workspace(ctx, fork)
	if err != nil {
		return err
	}
	defer locks.Close(ctx)
	if _, err := control.ReadWorkspace(ctx, h.cfg.Control, fork); errors.Is(err, control.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	_, err = h.PrepareTools(ctx, fork, rep)
	return err
}
