package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// KindResetFork renews a fork from its parent's current state (sqlapi/063_reset_fork.sql).
const KindResetFork = "reset_fork"

// Crash points of reset_fork (besides those of the copy it makes, fork.after_create_database
// and fork.after_load, and cluster.rename_database.after_rename).
const (
	CrashResetAfterStaging = "fork.reset.after_staging"  // new copy ready under its staging name, old copy untouched
	CrashResetAfterOldDrop = "fork.reset.after_old_drop" // old copy dropped and unregistered, staging copy not renamed
	CrashResetBeforeLakes  = "fork.reset.before_lakes"   // every copy renewed, lake namespaces not reset
)

// ForkResetter is another area's part of reset_fork (the lake area: drop what the fork
// materialized in its isolated namespaces, so that its reads defer to the parent again). It runs
// on a live fork, under the fork's workspace lock, after the copies were renewed; the Preparer
// then makes the namespaces again. It must be idempotent: an interrupted reset runs it again.
type ForkResetter interface {
	ResetFork(ctx context.Context, fork string, rep request.Reporter) (any, error)
}

type resetArgs struct {
	Fork string `json:"fork"`
}

// ResetResult is the result of a reset_fork request.
type ResetResult struct {
	Workspace  string      `json:"workspace"`
	Parent     string      `json:"parent"`
	Datatables []resetItem `json:"datatables"`
	// SessionsEnded counts the sessions this attempt terminated on the replaced copies.
	SessionsEnded int `json:"sessions_ended"`
	// Lakes is what the lake area's reset did; Prepared what the Preparer did afterwards.
	Lakes    any `json:"lakes,omitempty"`
	Prepared any `json:"prepared,omitempty"`
}

// resetItem is one datatable of a reset fork.
type resetItem struct {
	planItem
	SessionsEnded int `json:"sessions_ended"`
}

func (s *Service) handleResetFork(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args resetArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	var res *ResetResult
	err := s.withWorkspaceLock(ctx, args.Fork, func() error {
		var err error
		res, err = s.resetFork(ctx, req, rep, args.Fork)
		return err
	})
	s.count(metrics.OpResetFork, err == nil, err)
	if err != nil {
		s.log.Info("reset_fork did not succeed", "fork", args.Fork, "error", err)
		return nil, err
	}
	return res, nil
}

// resetFork, under the fork's workspace lock: check, drop leftovers of earlier resets, renew each
// schema_only and full_copy copy (resetCopy), then the lake part and the preparation.
// keep_original datatables share the parent's database and are not touched.
func (s *Service) resetFork(ctx context.Context, req *request.Request, rep request.Reporter, fork string) (*ResetResult, error) {
	pool := s.cfg.Control
	ws, err := control.ReadWorkspace(ctx, pool, fork)
	if errors.Is(err, control.ErrNotFound) {
		return nil, request.Refusef("reset_fork: no workspace %q", fork)
	}
	if err != nil {
		return nil, retryable(err)
	}
	if err := s.checkResettable(ctx, *ws); err != nil {
		return nil, err
	}
	incarnation, err := workspaceCreatedAt(ctx, pool, fork)
	if err != nil {
		return nil, err
	}
	items, err := s.resetPlan(ctx, *ws)
	if err != nil {
		return nil, err
	}
	if err := s.dropStaleStaging(ctx, rep, req, fork, items); err != nil {
		return nil, err
	}
	// A schema template of the fork's own entries copies a copy this reset replaces (and counts
	// as a use of it); nothing forks the fork any more (checkResettable), so it has no reader.
	if err := s.dropTemplatesOf(ctx, rep, fork); err != nil {
		return nil, fmt.Errorf("reset_fork: drop the schema templates of %q: %w", fork, err)
	}
	res := &ResetResult{Workspace: fork, Parent: ws.Parent, Datatables: []resetItem{}}
	for i := range items {
		if copied(items[i].Mode) {
			if err := s.resetCopy(ctx, req, rep, fork, incarnation, &items[i]); err != nil {
				return nil, err
			}
			res.SessionsEnded += items[i].SessionsEnded
		}
		res.Datatables = append(res.Datatables, items[i])
	}
	crashpoint.HitOnce(CrashResetBeforeLakes)
	if s.cfg.LakeReset != nil {
		if res.Lakes, err = s.cfg.LakeReset.ResetFork(ctx, fork, rep); err != nil {
			return nil, fmt.Errorf("reset_fork: the fork's copies are renewed, but its lakes were not reset (run reset_fork again): %w", err)
		}
	}
	if s.cfg.Preparer != nil {
		if res.Prepared, err = s.cfg.Preparer.PrepareFork(ctx, fork, rep); err != nil {
			return nil, fmt.Errorf("reset_fork: fork %q was reset, but preparing it for use failed (SELECT dataenv.prepare_connection(%q) retries it): %w",
				fork, fork, err)
		}
	}
	request.Report(ctx, rep, "workspace "+fork, "reset", fmt.Sprintf("from %s: %d datatable(s), %d session(s) ended", ws.Parent, len(items), res.SessionsEnded))
	return res, nil
}

// checkResettable refuses what reset_fork must not touch: a root workspace, an orphaned fork (no
// parent to renew from), a fork with child forks (they may share its copies through
// keep_original, or have been made from them), a protected fork. It is the one place the
// checks of reset_fork live.
func (s *Service) checkResettable(ctx context.Context, ws control.Workspace) error {
	if !ws.IsFork {
		return request.Refusef("reset_fork: workspace %q is not a fork: there is no parent to reset it from", ws.ID)
	}
	if ws.Parent == "" {
		return request.Refusef("reset_fork: fork %q has no parent any more (it was dropped): there is nothing to reset it from", ws.ID)
	}
	desc, err := descendants(ctx, s.cfg.Control, ws.ID, false)
	if err != nil {
		return err
	}
	if len(desc) > 0 {
		return request.Refusef("reset_fork: fork %q has child forks (%s): drop them first (dataenv.drop_fork), then reset it",
			ws.ID, strings.Join(desc, ", "))
	}
	// Protected after the request was made: refused here too, before anything is renewed.
	var protected bool
	if err := s.cfg.Control.QueryRow(ctx, `SELECT protected FROM dataenv.workspaces WHERE id = $1`, ws.ID).Scan(&protected); err != nil {
		return retryable(fmt.Errorf("read the protection of %q: %w", ws.ID, err))
	}
	if protected {
		return request.Refusef("reset_fork: workspace %q is protected: it cannot be reset; nothing was changed "+
			"(its owner or a dataenv administrator unprotects it first: SELECT dataenv.unprotect_workspace('%s'))", ws.ID, ws.ID)
	}
	return nil
}

// resetPlan is the fork's datatables, each with what its parent resolves to now.
func (s *Service) resetPlan(ctx context.Context, ws control.Workspace) ([]resetItem, error) {
	pool := s.cfg.Control
	mine, err := control.Datatables(ctx, pool, ws.ID)
	if err != nil {
		return nil, retryable(err)
	}
	theirs, err := control.Datatables(ctx, pool, ws.Parent)
	if err != nil {
		return nil, retryable(err)
	}
	parent := map[string]control.Resolution{}
	for _, d := range theirs {
		parent[d.Datatable] = d
	}
	var items []resetItem
	for _, d := range mine {
		it := resetItem{planItem: planItem{Datatable: d.Datatable, Mode: d.Mode, Cluster: d.Cluster, Database: d.Database, Status: "unchanged"}}
		if !copied(d.Mode) { // keep_original (the parent's database), or bound to the fork itself: not a copy
			items = append(items, it)
			continue
		}
		p, ok := parent[d.Datatable]
		if !ok {
			return nil, request.Refusef("reset_fork: the parent %q has no datatable %q any more: there is nothing to copy it from", ws.Parent, d.Datatable)
		}
		if p.Cluster != d.Cluster {
			return nil, request.Refusef("reset_fork: datatable %q of the parent %q is now on cluster %q, and the fork's copy on cluster %q: a copy is renewed on its own cluster only",
				d.Datatable, ws.Parent, p.Cluster, d.Cluster)
		}
		if d.Database != names.ForkDatabase(ws.ID, d.Datatable) {
			return nil, request.Refusef("reset_fork: datatable %q of fork %q names database %q, not its fork copy; it is left alone", d.Datatable, ws.ID, d.Database)
		}
		if err := s.cfg.Clusters.CheckBindable(ctx, p.Cluster, p.Database); err != nil {
			return nil, fmt.Errorf("reset_fork: datatable %q: %w", d.Datatable, err)
		}
		it.ParentDatabase, it.Source = p.Database, p.ResolvedFrom
		items = append(items, it)
	}
	return items, nil
}

// dropStaleStaging drops the staging copies earlier reset_fork requests of the fork left (a reset
// that failed for good after its staging copy was made): registry rows of the fork that name no
// datatable's database and are not this request's.
func (s *Service) dropStaleStaging(ctx context.Context, rep request.Reporter, req *request.Request, fork string, items []resetItem) error {
	copies, err := Copies(ctx, s.cfg.Control, fork)
	if err != nil {
		return err
	}
	named := map[string]bool{}
	for _, it := range items {
		named[it.Cluster+"/"+it.Database] = true
	}
	var stale []Copy
	for _, c := range copies {
		if !named[c.Cluster+"/"+c.Database] && c.Request != req.ID {
			stale = append(stale, c)
		}
	}
	dropped, failed := s.dropCopies(ctx, rep, stale)
	for _, c := range dropped {
		if err := forgetRoleDatabase(ctx, s.cfg.Control, c); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return request.Refusef("reset_fork: an earlier reset of %q left copies that cannot be dropped yet (%s)", fork, failureText(failed))
	}
	return nil
}

// forgetRoleDatabase removes a dropped staging copy from the databases recorded for the fork's
// role (forkOwnerOf recorded it when the copy was made).
func forgetRoleDatabase(ctx context.Context, q *pgxpool.Pool, c Copy) error {
	if _, err := q.Exec(ctx, `DELETE FROM dataenv.workspace_role_databases WHERE cluster = $1 AND workspace = $2 AND database = $3`,
		c.Cluster, c.Workspace, c.Database); err != nil {
		return retryable(fmt.Errorf("forget database %q of the role of workspace %q: %w", c.Database, c.Workspace, err))
	}
	return nil
}

// resetCopy renews one copy: a new copy of the parent's current state is made under a staging
// name (ensureCopy, as create_fork makes a copy: owned by the fork's workspace role, finished
// the same way), then, under the cluster's lifecycle lock, the sessions on the old copy are
// ended, the old copy is dropped (its registry row, record, marker and OID checked) and
// unregistered, and the new one is renamed to the copy's name, its record and registry row
// following in one control transaction. Each step leaves registry rows that say what exists, so
// a rerun of the request goes on from where it stopped: a copy whose row is this request's is
// done.
func (s *Service) resetCopy(ctx context.Context, req *request.Request, rep request.Reporter, fork string, incarnation time.Time, it *resetItem) error {
	cur, err := readCopy(ctx, s.cfg.Control, it.Cluster, it.Database)
	if err != nil {
		return err
	}
	if cur != nil && cur.Request == req.ID {
		it.Method, it.Fidelity, it.Status = cur.Method, cur.Report, "renewed" // by an earlier attempt of this request
		return nil
	}
	staging := resetStagingName(req.ID, it.Datatable)
	st := it.planItem
	st.Database = staging
	if err := s.ensureCopy(ctx, req, rep, fork, incarnation, &st); err != nil {
		if !request.IsTransient(err) {
			s.dropStaging(ctx, rep, req, fork, it, staging)
		}
		return fmt.Errorf("reset_fork: make the new copy of datatable %q: %w", it.Datatable, err)
	}
	it.Method, it.Fidelity, it.CloneUnavailable = st.Method, st.Fidelity, st.CloneUnavailable
	crashpoint.HitOnce(CrashResetAfterStaging)
	step := fmt.Sprintf("replace copy %s of datatable %s", it.Database, it.Datatable)
	oldLeft := true // the old copy is still there: a final failure leaves the fork as it was
	err = s.cfg.Clusters.WithLifecycleLock(ctx, it.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		old, err := readCopy(ctx, l.Control(), it.Cluster, it.Database)
		if err != nil {
			return err
		}
		if old != nil && old.Request != req.ID {
			if err := dropOldCopy(ctx, l, rep, step, *old, fork, it); err != nil {
				return err
			}
			oldLeft = false
			if err := unregisterCopy(ctx, l.Control(), *old); err != nil {
				return err
			}
		} else if old == nil {
			oldLeft = false
		}
		crashpoint.HitOnce(CrashResetAfterOldDrop)
		// Nobody should be on the staging copy (its name is dataenv's), but a session there would
		// refuse the rename.
		if _, err := terminateSessions(ctx, l, staging); err != nil {
			return err
		}
		return l.RenameMarkedDatabase(ctx, staging, it.Database, req.ID, func(ctx context.Context, tx pgx.Tx) error {
			if err := adoptStaging(ctx, tx, it.Cluster, fork, staging, it.Database, req.ID); err != nil {
				return err
			}
			// As a new fork does: the next spare, or a template of the parent's new schema.
			return enqueueTemplate(ctx, tx, req, &it.planItem)
		})
	})
	if err != nil {
		// Without its old copy the fork keeps the staging one: the next reset replaces it.
		if oldLeft && !request.IsTransient(err) {
			s.dropStaging(ctx, rep, req, fork, it, staging)
		}
		return fmt.Errorf("reset_fork: replace the copy of datatable %q: %w", it.Datatable, err)
	}
	it.Status = "renewed"
	request.Reportf(ctx, rep, step, "done", "a new %s copy of %s (by %s)", it.Mode, it.ParentDatabase, it.Method)
	return nil
}

// dropStaging drops this request's staging copy after a final error, so that a failed reset
// leaves the fork as it was; a failure is reported (the next reset, or drop_fork, drops it).
func (s *Service) dropStaging(ctx context.Context, rep request.Reporter, req *request.Request, fork string, it *resetItem, staging string) {
	ctx = context.WithoutCancel(ctx)
	row, err := readCopy(ctx, s.cfg.Control, it.Cluster, staging)
	if err != nil || row == nil || row.Request != req.ID {
		return
	}
	if err := s.dropCopy(ctx, rep, *row); err != nil {
		request.Report(ctx, rep, "drop staging copy "+staging, "failed", err.Error())
		return
	}
	if err := forgetRoleDatabase(ctx, s.cfg.Control, *row); err != nil {
		request.Report(ctx, rep, "drop staging copy "+staging, "failed", err.Error())
	}
}

// adoptStaging moves the registry rows of the staging copy to the copy's name, in the transaction
// that moves its record: its fork-copy row, and the database recorded for the fork's role.
func adoptStaging(ctx context.Context, tx pgx.Tx, clusterName, fork, staging, database string, req uuid.UUID) error {
	if _, err := tx.Exec(ctx, `UPDATE dataenv.fork_copies SET database = $3 WHERE cluster = $1 AND database = $2 AND created_by_request = $4`,
		clusterName, staging, database, req); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM dataenv.fork_copies WHERE cluster = $1 AND database = $2 AND created_by_request = $3 AND state = 'ready'`,
		clusterName, database, req).Scan(&n); err != nil {
		return err
	}
	if n != 1 {
		return request.Refusef("the registry has no ready copy %q of request %s after the rename of %q", database, req, staging)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM dataenv.workspace_role_databases WHERE cluster = $1 AND workspace = $2 AND database = $3`,
		clusterName, fork, staging); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO dataenv.workspace_role_databases (cluster, workspace, database) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		clusterName, fork, database)
	return err
}

// resetStagingName is the name a renewed copy is made under: a fork database name (the registry
// and every cleanup accept only those), derived from the request and the datatable so that a
// rerun finds it.
func resetStagingName(req uuid.UUID, datatable string) string {
	h := sha256.Sum256([]byte(req.String() + "/" + datatable))
	return names.ForkPrefix + "reset_" + hex.EncodeToString(h[:12])
}

// dropOldCopy ends the sessions on the copy a reset replaces and drops it. An autovacuum worker
// on it is outlasted by the drop itself (cluster's dropDatabase); what is left is transient.
func dropOldCopy(ctx context.Context, l *cluster.Locked, rep request.Reporter, step string, old Copy, fork string, it *resetItem) error {
	n, err := terminateSessions(ctx, l, it.Database)
	it.SessionsEnded += n
	if err != nil {
		return err
	}
	if n > 0 {
		request.Reportf(ctx, rep, step, "sessions ended", "%d session(s) on %s terminated", n, it.Database)
	}
	if err := dropCopyLocked(ctx, l, old, cluster.Use{Kind: UseDatatable, Name: fork + "/" + it.Datatable}); err != nil {
		return onlyWorkersLeft(ctx, l, it.Database, err)
	}
	return nil
}

// terminateSessions ends every session of a role connected to database (pg_terminate_backend)
// and says how many it ended; server processes without a role (autovacuum workers) are left to
// DROP DATABASE. A session the cluster's admin may not end (a superuser's) refuses the reset.
func terminateSessions(ctx context.Context, l *cluster.Locked, database string) (int, error) {
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(pid))::int
		FROM pg_catalog.pg_stat_activity
		WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid() AND usesysid IS NOT NULL`, database).Scan(&n)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			return 0, request.Refusef("the sessions on %q cannot be ended by the cluster's admin (%v); close them, then reset again", database, err)
		}
		return 0, retryable(fmt.Errorf("end the sessions on %q: %w", database, err))
	}
	return n, nil
}

// copied reports whether a datatable entry of mode is a copy of the fork's own.
func copied(mode string) bool { return mode == ModeSchemaOnly || mode == ModeFullCopy }

// onlyWorkersLeft makes transient the refusal of a drop that found processes it may not
// terminate when none of them is a session of a role: a server process without one (an
// autovacuum worker, which DROP DATABASE ... WITH (FORCE) refuses to end for a non-superuser)
// ends by itself, and the next attempt drops the copy. Any other error is returned as it is.
func onlyWorkersLeft(ctx context.Context, l *cluster.Locked, database string, dropErr error) error {
	if !request.IsRefused(dropErr) || !strings.Contains(dropErr.Error(), "may not terminate") {
		return dropErr
	}
	conn, err := l.Connect(ctx, "")
	if err != nil {
		return dropErr
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var clients, workers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE usesysid IS NOT NULL)::int, count(*) FILTER (WHERE usesysid IS NULL)::int
		FROM pg_catalog.pg_stat_activity WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()`, database).Scan(&clients, &workers); err != nil {
		return dropErr
	}
	if clients == 0 {
		return retryable(fmt.Errorf("drop the old copy %q: server processes without a role (autovacuum; %d now) were on it: %v", database, workers, dropErr))
	}
	return dropErr
}

// workspaceCreatedAt is the workspace's created_at: its incarnation, which its roles are made for.
func workspaceCreatedAt(ctx context.Context, q control.Querier, id string) (time.Time, error) {
	var at time.Time
	if err := q.QueryRow(ctx, `SELECT created_at FROM dataenv.workspaces WHERE id = $1`, id).Scan(&at); err != nil {
		return at, retryable(fmt.Errorf("read the created_at of workspace %q: %w", id, err))
	}
	return at, nil
}
