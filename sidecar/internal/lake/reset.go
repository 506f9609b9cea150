package lake

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// CrashResetBeforeForget: reset_fork dropped the fork's namespaces, its materialization records
// are not deleted yet.
const CrashResetBeforeForget = "lake.reset.before_forget"

// ResetReport says what the lake part of reset_fork did.
type ResetReport struct {
	// Namespaces are the fork's isolated namespaces dropped (metadata schema, data prefix, registry
	// row), as drop_fork's cleanup drops them; the Preparer makes them again, empty.
	Namespaces []NamespaceCleanup `json:"namespaces"`
	// MaterializationsForgotten counts the fork's materialization records removed: with none, every
	// table of an isolated lake defers to the parent again (dataenv.fork_materialization).
	MaterializationsForgotten int64 `json:"materializations_forgotten"`
}

// ResetFork implements workspace.ForkResetter: the fork's isolated lake namespaces lose what the
// fork materialized. Each registry row is cleaned as Cleanup cleans it for a dropped fork (the
// same guards: fork prefix, dataenv's marker, recorded OID, data under the fork's prefix), then
// the fork's materialization records of its isolated lakes are deleted. The fork's lake
// configuration stays. It is idempotent; the caller holds the fork's workspace lock, and makes
// the namespaces again afterwards (the Preparer of create_fork).
func (h *Hooks) ResetFork(ctx context.Context, fork string, rep request.Reporter) (any, error) {
	defer h.registry.Invalidate(fork)
	var isFork bool
	err := h.pool.QueryRow(ctx, `SELECT is_fork FROM dataenv.workspaces WHERE id = $1`, fork).Scan(&isFork)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, request.Refusef("reset the lakes of %q: no such workspace", fork)
	}
	if err != nil {
		return nil, request.Retryable(err)
	}
	if !isFork {
		return nil, request.Refusef("reset the lakes of %q: not a fork", fork)
	}
	rows, err := h.registryRows(ctx, fork)
	if err != nil {
		return nil, err
	}
	report := &ResetReport{Namespaces: []NamespaceCleanup{}}
	left, schemasLeft := 0, 0
	for _, row := range rows {
		nc := h.cleanupRow(ctx, row, rep)
		if nc.SchemaDropped && h.Access != nil {
			h.Access.ForgetSchema(row.Cluster, row.Database, row.Schema)
		}
		report.Namespaces = append(report.Namespaces, nc)
		if !nc.Done {
			left++
			if !nc.SchemaDropped {
				schemasLeft++
			}
		}
	}
	h.registry.Invalidate(fork)
	if left > 0 {
		return report, &CleanupError{Fork: fork, Report: &CleanupReport{Namespaces: report.Namespaces}, SchemasLeft: schemasLeft}
	}
	crashpoint.HitOnce(CrashResetBeforeForget)
	tag, err := h.pool.Exec(ctx, `DELETE FROM dataenv.materializations m WHERE m.workspace = $1
		AND EXISTS (SELECT FROM dataenv.lakes l WHERE l.workspace = m.workspace AND l.name = m.lake AND l.fork_behavior = 'isolated')`, fork)
	if err != nil {
		return report, request.Retryable(fmt.Errorf("forget the materializations of fork %q: %w", fork, err))
	}
	report.MaterializationsForgotten = tag.RowsAffected()
	request.Reportf(ctx, rep, "lakes of "+fork, "reset", "%d namespace(s) dropped, %d materialization record(s) forgotten",
		len(report.Namespaces), report.MaterializationsForgotten)
	return report, nil
}
