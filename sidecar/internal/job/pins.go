package job

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Request kinds of pinned reads (sqlapi/064_pinned_reads.sql).
const (
	KindRepinFork    = "repin_fork"
	KindMaintainLake = "maintain_lake"
)

// PinFork takes the first pins of a fork made with pin_lakes (workspace.ForkPinner), before the
// fork is prepared, so that its defer views are made at the pins. A fork that has pins already
// (a create_fork run again after an interruption) keeps them. The caller holds the fork's lock.
func (h *Handlers) PinFork(ctx context.Context, fork string, rep request.Reporter) (any, error) {
	return h.cfg.Resolver.PinFork(ctx, fork, true, rep)
}

// RepinResult is the result of repin_fork.
type RepinResult struct {
	Fork     string       `json:"fork"`
	Pins     []lake.Pin   `json:"pins"`
	Prepared *ToolsReport `json:"prepared"`
	Notes    []string     `json:"notes,omitempty"`
}

// subForksSQL: the forks below a workspace that were prepared for their members' tools, nearest
// first (those without pins of their own read through its pins).
const subForksSQL = `
SELECT c.workspace FROM dataenv.workspace_chain_all c
  JOIN dataenv.workspace_tool_scripts t ON t.workspace = c.workspace
 WHERE c.ancestor = $1 AND c.depth > 0
 ORDER BY c.depth, c.workspace`

// handleRepin moves a fork's pins to now, prepares the fork again (its defer views and DuckDB
// script follow the new pins), then the forks below it.
func (h *Handlers) handleRepin(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var a struct {
		Fork string `json:"fork"`
	}
	if err := request.DecodeArgs(req, &a); err != nil {
		return nil, err
	}
	out, err := h.repin(ctx, a.Fork, rep)
	if err != nil {
		return nil, err
	}
	rows, err := h.cfg.Control.Query(ctx, subForksSQL, a.Fork)
	if err == nil {
		var subs []string
		if subs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			for _, f := range subs {
				if err := h.refreshFork(ctx, f, rep); err != nil {
					out.Notes = append(out.Notes, fmt.Sprintf("fork %s was not prepared again (its defer views follow at its next job or prepare_connection): %v", f, err))
				}
			}
		}
	}
	if err != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("the forks below %s were not prepared again: %v", a.Fork, err))
	}
	return out, nil
}

func (h *Handlers) repin(ctx context.Context, fork string, rep request.Reporter) (*RepinResult, error) {
	locks, err := h.cfg.WorkspaceLocks.Workspace(ctx, fork)
	if err != nil {
		return nil, request.Retryable(err)
	}
	defer locks.Close(ctx)
	ws, err := control.ReadWorkspace(ctx, h.cfg.Control, fork)
	if errors.Is(err, control.ErrNotFound) {
		return nil, request.Refusef("repin_fork: no workspace %q", fork)
	} else if err != nil {
		return nil, request.Retryable(err)
	}
	if !ws.IsFork {
		return nil, request.Refusef("repin_fork: workspace %q is not a fork", fork)
	}
	pins, err := h.cfg.Resolver.PinFork(ctx, fork, false, rep)
	if err != nil {
		return nil, err
	}
	prepared, err := h.PrepareTools(ctx, fork, rep)
	if err != nil {
		return nil, fmt.Errorf("fork %q was repinned, but preparing it again failed (SELECT dataenv.prepare_connection(%q) retries it): %w", fork, fork, err)
	}
	return &RepinResult{Fork: fork, Pins: pins, Prepared: prepared}, nil
}

// MaintainResult is the result of maintain_lake.
type MaintainResult struct {
	lake.Maintenance
	// FilesDeleted counts the files ducklake_cleanup_old_files deleted.
	FilesDeleted int      `json:"files_deleted"`
	Notes        []string `json:"notes,omitempty"`
}

// handleMaintain runs DuckLake's snapshot expiry and file cleanup on a workspace's own namespace
// of a lake, as a job in the workspace (its role, its limits), keeping the current snapshot and
// every snapshot a live fork pins.
func (h *Handlers) handleMaintain(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var a struct {
		Workspace string `json:"workspace"`
		Lake      string `json:"lake"`
	}
	if err := request.DecodeArgs(req, &a); err != nil {
		return nil, err
	}
	lim, err := h.limits(ctx, a.Workspace, 0)
	if err != nil {
		return nil, err
	}
	var out *MaintainResult
	err = h.cfg.Resolver.Maintain(ctx, a.Workspace, a.Lake, rep, func(ctx context.Context, m *lake.Maintenance) error {
		out = &MaintainResult{Maintenance: *m}
		if !m.Bootstrapped {
			out.Notes = []string{"the lake has no DuckLake catalog in this workspace yet: nothing to maintain"}
			return nil
		}
		plan, err := h.cfg.Resolver.Resolve(ctx, a.Workspace, lake.MaintenanceSQL(m), nil, rep)
		if err != nil {
			return err
		}
		defer plan.Close()
		res, err := h.runJob(ctx, plan, lim, []string{plan.SQL}, true, 0)
		if err != nil {
			return err
		}
		out.FilesDeleted = len(res.Results[len(res.Results)-1].Rows)
		out.Notes = plan.Notes
		request.Reportf(ctx, rep, "lake "+a.Lake, "maintained", "%d snapshot(s) expired, %d pinned kept, %d file(s) deleted",
			len(m.Expire), len(m.Pinned), out.FilesDeleted)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
