package workspace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

type dropArgs struct {
	Fork    string `json:"fork"`
	Cascade bool   `json:"cascade"`
	// ExpiredAt is set on the drops the leader files for expired forks (sqlapi/061_fork_expiry.sql):
	// the expiry that had passed. A fork whose expiry was moved since is not dropped.
	ExpiredAt *string `json:"expired_at"`
}

// DropResult is the result of a drop_fork request.
type DropResult struct {
	// Workspaces dropped by this run (children first); empty when only leftovers were cleaned.
	Workspaces []string `json:"workspaces"`
	Dropped    []Copy   `json:"dropped"`
}

func (s *Service) handleDropFork(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args dropArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	var res *DropResult
	locks, err := s.cfg.WorkspaceLocks.Workspace(ctx, args.Fork)
	if err == nil {
		res, err = s.dropFork(ctx, req, rep, locks, args)
		locks.Close(ctx)
	} else {
		err = retryable(err)
	}
	s.count(metrics.OpDropFork, err == nil, err)
	if err != nil {
		s.log.Info("drop_fork did not succeed", "fork", args.Fork, "error", err)
		return nil, err
	}
	return res, nil
}

// dropFork drops the fork (and, with cascade, its descendants first, all of them locked): for each workspace, the
// row goes first (its datatables stop naming the copies; what remains is the registry, the
// cleanup ledger), then its schema templates and each copy, whose registry row is deleted only
// after its drop succeeded, then other areas' cleanups (the fork's workspace roles last: they own
// the copies). Anything that fails is reported and stays registered: running
// drop_fork again retries exactly that.
func (s *Service) dropFork(ctx context.Context, req *request.Request, rep request.Reporter, locks *lock.WorkspaceLocks, args dropArgs) (*DropResult, error) {
	targets, err := s.dropTargets(ctx, req, args)
	if err != nil {
		return nil, err
	}
	// The forks below are locked too, ancestors first (targets are deepest first): a child's
	// create_fork or prepare_connection still running would recreate what its drop removes.
	for i := len(targets) - 1; i >= 0; i-- {
		if err := locks.Also(ctx, targets[i]); err != nil {
			return nil, retryable(err)
		}
	}
	res := &DropResult{Workspaces: []string{}, Dropped: []Copy{}}
	var failed []copyFailure
	var cleanupErrs []error
	for _, t := range targets {
		gone, err := s.deleteWorkspace(ctx, t)
		if err != nil {
			return res, err
		}
		if gone {
			res.Workspaces = append(res.Workspaces, t)
			request.Report(ctx, rep, "workspace "+t, "dropped", "")
		}
		crashpoint.HitOnce(CrashAfterWorkspaceDrop)
		// Templates of the fork's entries first: a template counts as a use of the copy it copies.
		if err := s.dropTemplatesOf(ctx, rep, t); err != nil {
			cleanupErrs = append(cleanupErrs, fmt.Errorf("workspace %s: %w", t, err))
		}
		copies, err := Copies(ctx, s.cfg.Control, t)
		if err != nil {
			return res, err
		}
		dropped, f := s.dropCopies(ctx, rep, copies)
		res.Dropped = append(res.Dropped, dropped...)
		failed = append(failed, f...)
		// Then the other areas' cleanups, the workspace's roles among them (cluster.Admin's
		// CleanupFork): the copies are owned by the fork's role, which cannot be dropped while
		// it owns a database.
		for _, c := range s.cfg.Cleaners {
			if err := c.CleanupFork(ctx, t, rep); err != nil {
				cleanupErrs = append(cleanupErrs, fmt.Errorf("workspace %s: %w", t, err))
			}
		}
	}
	if err := partialDropError(args.Fork, failed, cleanupErrs); err != nil {
		return res, err
	}
	for _, t := range targets {
		if _, err := s.cfg.Control.Exec(ctx, `SELECT dataenv.bury_workspace($1)`, t); err != nil {
			return res, retryable(fmt.Errorf("drop_fork: forget workspace %q: %w", t, err))
		}
	}
	return res, nil
}

// partialDropError is the error of a drop_fork that left copies or cleanups undone (nil when
// none): what failed, each with its error. It is transient (the dispatcher retries the request
// as a new attempt, which fences this one) when every part is: a lost connection, a restarting
// server, a sidecar that lost leadership. Any final part (a refusal, an error a person must act
// on) makes the whole error final, and the request says to run drop_fork again once it is fixed.
func partialDropError(fork string, failed []copyFailure, cleanupErrs []error) error {
	if len(failed) == 0 && len(cleanupErrs) == 0 {
		return nil
	}
	transient := true
	msg := "drop_fork: " + fork + ": "
	if len(failed) > 0 {
		msg += fmt.Sprintf("%d fork copies could not be dropped (%s); ", len(failed), failureText(failed))
		transient = allTransient(failed)
	}
	if len(cleanupErrs) > 0 {
		parts := make([]string, len(cleanupErrs))
		for i, e := range cleanupErrs {
			parts[i] = e.Error()
			transient = transient && request.IsTransient(e)
		}
		msg += "cleanup failed: " + strings.Join(parts, "; ") + "; "
	}
	return &partialDrop{msg: msg + "they stay registered: run dataenv.drop_fork again to retry", transient: transient}
}

// partialDrop is partialDropError's error: it says itself whether it is transient, so that the
// text of a transient part never makes a final one look transient.
type partialDrop struct {
	msg       string
	transient bool
}

func (e *partialDrop) Error() string   { return e.msg }
func (e *partialDrop) Transient() bool { return e.transient }

// dropTargets checks the request and returns the workspaces to drop, descendants first. A fork
// id whose workspace is already gone but of which something is left (an earlier drop failed
// part-way) is a target too: its tombstone's owner (or an administrator, which the request's
// policy checked) finishes that cleanup.
func (s *Service) dropTargets(ctx context.Context, req *request.Request, args dropArgs) ([]string, error) {
	pool := s.cfg.Control
	ws, err := control.ReadWorkspace(ctx, pool, args.Fork)
	if errors.Is(err, control.ErrNotFound) {
		var left bool
		// The workspace role records count too: a retry after a role drop that failed (or was
		// interrupted) must drop the roles, not report the fork dropped with its roles left.
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM dataenv.workspace_leftovers($1))
			OR EXISTS (SELECT FROM dataenv.workspace_roles WHERE workspace = $1)`, args.Fork).Scan(&left); err != nil {
			return nil, retryable(err)
		}
		// A cascade interrupted after it deleted the rows: the forks below that it dropped are
		// found by their tombstones, and their cleanups finished too.
		var below []string
		if args.Cascade {
			if below, err = descendants(ctx, pool, args.Fork, true); err != nil {
				return nil, err
			}
		}
		if !left && len(below) == 0 {
			if req.Attempts > 1 {
				return nil, nil // an earlier attempt of this request finished the drop before it was interrupted
			}
			return nil, request.Refusef("drop_fork: no workspace %q, and nothing of a dropped one is left", args.Fork)
		}
		return append(below, args.Fork), nil
	}
	if err != nil {
		return nil, err
	}
	if !ws.IsFork {
		return nil, request.Refusef("drop_fork: workspace %q is not a fork (dataenv.drop_workspace drops a root workspace)", args.Fork)
	}
	desc, err := descendants(ctx, pool, args.Fork, false)
	if err != nil {
		return nil, err
	}
	if len(desc) > 0 && !args.Cascade {
		return nil, request.Refusef("drop_fork: workspace %q has child forks (%s): drop them first, or ask for the cascade explicitly (cascade => true)",
			args.Fork, strings.Join(desc, ", "))
	}
	if args.Cascade {
		// Forks below that an interrupted attempt of this cascade already deleted: their rows are
		// gone, their tombstones (kept until their cleanup succeeded) still say whose they were.
		if desc, err = descendants(ctx, pool, args.Fork, true); err != nil {
			return nil, err
		}
	}
	if err := checkStillExpired(ctx, pool, args); err != nil {
		return nil, err
	}
	if err := refuseProtected(ctx, pool, args.Fork, append([]string{args.Fork}, desc...)); err != nil {
		return nil, err
	}
	// The request's policy (workspace_owner of args.Fork) was checked before the handler ran; a
	// cascade also drops the forks below, each of which the requester must own too.
	for _, w := range append([]string{args.Fork}, desc...) {
		a, err := control.WorkspaceAccess(ctx, pool, w, req.RequestedBy)
		if err != nil {
			return nil, retryable(err)
		}
		if !a.CanUse() {
			return nil, request.Refusef("drop_fork: %s is not a member of workspace %q", req.RequestedBy, w)
		}
		if !a.CanOwn() {
			return nil, request.Refusef("drop_fork: %s is not the owner of workspace %q (only its owner or a dataenv administrator may drop it)", req.RequestedBy, w)
		}
	}
	return append(desc, args.Fork), nil
}

// descendantsSQL lists the forks below $1, deepest first; with $2, the dropped ones whose
// tombstone is still there (their cleanup has not succeeded yet) too.
const descendantsSQL = `
WITH RECURSIVE nodes AS (
    SELECT w.id, w.parent FROM dataenv.workspaces w
    UNION ALL
    SELECT t.id, t.parent FROM dataenv.workspace_tombstones t
     WHERE $2 AND NOT EXISTS (SELECT FROM dataenv.workspaces w WHERE w.id = t.id)),
d AS (
    SELECT n.id, 1 AS depth FROM nodes n WHERE n.parent = $1
    UNION ALL
    SELECT n.id, d.depth + 1 FROM nodes n JOIN d ON n.parent = d.id WHERE d.depth < 100)
SELECT id FROM d GROUP BY id ORDER BY max(depth) DESC, id`

// descendants lists the forks below id, deepest first; withDropped adds the dropped ones still
// tombstoned.
func descendants(ctx context.Context, q control.Querier, id string, withDropped bool) ([]string, error) {
	rows, err := q.Query(ctx, descendantsSQL, id, withDropped)
	if err != nil {
		return nil, retryable(fmt.Errorf("list the forks of %q: %w", id, err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, retryable(fmt.Errorf("list the forks of %q: %w", id, err))
	}
	return out, nil
}

// deleteWorkspace deletes the workspace row (its datatable entries and members cascade) under
// the lifecycle locks of the clusters its datatables name, refusing if a child fork appeared.
// It reports whether a row was deleted.
func (s *Service) deleteWorkspace(ctx context.Context, id string) (bool, error) {
	var gone bool
	err := pgx.BeginFunc(ctx, s.cfg.Control, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT DISTINCT cluster FROM dataenv.datatables WHERE workspace = $1`, id)
		if err != nil {
			return retryable(err)
		}
		clusters, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return retryable(err)
		}
		sort.Strings(clusters)
		for _, c := range clusters {
			if err := lock.XactLifecycle(ctx, tx, c); err != nil {
				return retryable(err)
			}
		}
		// Protected since the targets were checked? The row lock orders this with protect_workspace.
		var protected bool
		err = tx.QueryRow(ctx, `SELECT protected FROM dataenv.workspaces WHERE id = $1 FOR UPDATE`, id).Scan(&protected)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return retryable(err)
		}
		if protected {
			return request.Refusef("drop_fork: workspace %q was protected while the drop ran: it was not dropped "+
				"(its owner or a dataenv administrator unprotects it first: SELECT dataenv.unprotect_workspace('%s'))", id, id)
		}
		var children int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM dataenv.workspaces WHERE parent = $1`, id).Scan(&children); err != nil {
			return retryable(err)
		}
		if children > 0 {
			return request.Refusef("drop_fork: a fork of %q was created meanwhile; run drop_fork again (with cascade to drop it too)", id)
		}
		tag, err := tx.Exec(ctx, `DELETE FROM dataenv.workspaces WHERE id = $1 AND is_fork`, id)
		if err != nil {
			return retryable(fmt.Errorf("delete workspace %q: %w", id, err))
		}
		gone = tag.RowsAffected() > 0
		return nil
	})
	return gone, err
}

// refuseProtected refuses the drop of fork when any of targets (the fork and, with cascade, the
// forks below it) is protected: nothing is dropped.
func refuseProtected(ctx context.Context, q control.Querier, fork string, targets []string) error {
	rows, err := q.Query(ctx, `SELECT id FROM dataenv.workspaces WHERE id = ANY ($1) AND protected ORDER BY id`, targets)
	if err != nil {
		return retryable(fmt.Errorf("read the protection of %q: %w", fork, err))
	}
	hit, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return retryable(fmt.Errorf("read the protection of %q: %w", fork, err))
	}
	if len(hit) == 0 {
		return nil
	}
	return protectedError(fork, hit)
}

// protectedError is the refusal of a drop that would remove the protected workspaces hit.
func protectedError(fork string, hit []string) error {
	if len(hit) == 1 && hit[0] == fork {
		return request.Refusef("drop_fork: workspace %q is protected: it cannot be dropped; nothing was dropped "+
			"(its owner or a dataenv administrator unprotects it first: SELECT dataenv.unprotect_workspace('%s'))", fork, fork)
	}
	return request.Refusef("drop_fork: protected workspaces (%s) are in the way: %q cannot be dropped; nothing was dropped "+
		"(their owners or a dataenv administrator unprotect them first: SELECT dataenv.unprotect_workspace('%s'))",
		strings.Join(hit, ", "), fork, hit[0])
}

// checkStillExpired refuses a drop filed for an expiry (args.ExpiredAt) when the fork no longer
// expires by now: set_fork_expiry moved or cleared its expiry after the drop was filed.
func checkStillExpired(ctx context.Context, q control.Querier, args dropArgs) error {
	if args.ExpiredAt == nil {
		return nil
	}
	var expired bool
	var now *string
	err := q.QueryRow(ctx, `SELECT coalesce(expires_at <= now(), false), expires_at::text FROM dataenv.workspaces WHERE id = $1`,
		args.Fork).Scan(&expired, &now)
	if err != nil {
		return retryable(fmt.Errorf("read the expiry of %q: %w", args.Fork, err))
	}
	if expired {
		return nil
	}
	if now == nil {
		return request.Refusef("drop_fork: fork %q was filed for dropping when it expired at %s, but its expiry has been cleared since: not dropped",
			args.Fork, *args.ExpiredAt)
	}
	return request.Refusef("drop_fork: fork %q was filed for dropping when it expired at %s, but it now expires at %s: not dropped",
		args.Fork, *args.ExpiredAt, *now)
}
