package workspace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lock"
	"github.com/dataenv/dataenv/sidecar/internal/metrics"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// Datatable modes of create_fork.
const (
	ModeKeepOriginal = "keep_original"
	ModeSchemaOnly   = "schema_only"
	ModeFullCopy     = "full_copy"
)

type createArgs struct {
	Parent      string            `json:"parent"`
	Fork        string            `json:"fork"`
	Datatables  map[string]string `json:"datatables"`
	SharedLakes []string          `json:"shared_lakes"`
	// ExpiresIn is an interval (PostgreSQL's text form); nil takes the parent's policy
	// (dataenv.fork_expires_at, sqlapi/061_fork_expiry.sql).
	ExpiresIn *string `json:"expires_in"`
	PinLakes  bool    `json:"pin_lakes"`
}

// parseCreateArgs maps the args onto createArgs. Their rules (ids, modes, lake names) are
// dataenv.validate_create_fork's, applied when the row was inserted; a row's args never change.
func parseCreateArgs(req *request.Request) (createArgs, error) {
	var a createArgs
	if err := request.DecodeArgs(req, &a); err != nil {
		return a, err
	}
	if a.SharedLakes == nil {
		a.SharedLakes = []string{}
	}
	return a, nil
}

// planItem is one datatable of the new fork.
type planItem struct {
	Datatable      string `json:"datatable"`
	Mode           string `json:"mode"`
	Cluster        string `json:"cluster"`
	Database       string `json:"database"`        // what the fork's entry names
	ParentDatabase string `json:"parent_database"` // what the parent resolved to
	Method         string `json:"method,omitempty"`
	Status         string `json:"status,omitempty"`
	// Source is the workspace whose entry names ParentDatabase (the parent, or the ancestor its
	// keep_original chain reaches): the entry a schema template belongs to.
	Source string `json:"source,omitempty"`
	// Fidelity says what the copy kept of its parent (owner, mapped roles, what was not carried).
	Fidelity *Fidelity `json:"fidelity,omitempty"`
	// CloneUnavailable says why a full_copy of an idle parent was not a reflink clone.
	CloneUnavailable string `json:"clone_unavailable,omitempty"`
}

// ForkResult is the result of a create_fork request.
type ForkResult struct {
	Workspace   string     `json:"workspace"`
	Parent      string     `json:"parent"`
	Datatables  []planItem `json:"datatables"`
	SharedLakes []string   `json:"shared_lakes"`
	// Prepared is what Config.Preparer did (roles, grants, lake namespaces).
	Prepared any `json:"prepared,omitempty"`
	// Pins are the pins of a fork made with pin_lakes (Config.Pinner).
	Pins any `json:"pins,omitempty"`
	pin  bool
}

func (s *Service) handleCreateFork(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	// A fork of small datatables is a few tens of milliseconds of short steps: written with its
	// outcome, they cost it no commits of their own; a longer fork's show up a moment late.
	rep = request.Holding(rep)
	args, err := parseCreateArgs(req)
	if err != nil {
		request.Report(ctx, rep, "create_fork", "refused", err.Error())
		return nil, err
	}
	var res *ForkResult
	err = s.withWorkspaceLock(ctx, args.Fork, func() error {
		res, err = s.createFork(ctx, req, rep, args)
		return err
	})
	s.count(metrics.OpCreateFork, err == nil, err)
	if err != nil {
		s.log.Info("create_fork did not succeed", "fork", args.Fork, "parent", args.Parent, "error", err)
		return nil, err
	}
	return res, nil
}

// createFork: check, clean up a previous incarnation, make the copies, commit the workspace.
func (s *Service) createFork(ctx context.Context, req *request.Request, rep request.Reporter, args createArgs) (*ForkResult, error) {
	reads, err := s.readFork(ctx, req, args)
	if err != nil {
		return nil, err
	}
	if ws, err := reads.fork, reads.forkErr; err == nil {
		if ws.CreatedByRequest == req.ID.String() {
			res, err := s.describe(ctx, args) // committed before an interruption
			if err != nil {
				return nil, err
			}
			res.pin = args.PinLakes
			return s.prepare(ctx, rep, res)
		}
		return nil, request.Refusef("create_fork: workspace %q already exists", args.Fork)
	} else if !errors.Is(err, control.ErrNotFound) {
		return nil, err
	}
	begun := s.cfg.Now()
	plan, err := s.plan(ctx, req, args, reads)
	if err != nil {
		return nil, err
	}
	incarnation := reads.createdAt
	planned := s.cfg.Now()
	if err := s.cleanupPreviousIncarnation(ctx, rep, req, args.Fork, reads); err != nil {
		if request.IsTransient(err) {
			return nil, err // the next attempt cleans up and goes on
		}
		// Final: what earlier attempts of this request made (copies, the fork's roles) goes.
		return nil, s.rollback(ctx, req, rep, args.Fork, incarnation, err)
	}
	checked := s.cfg.Now()
	for i := range plan {
		if plan[i].Mode == ModeKeepOriginal {
			continue
		}
		if err := s.ensureCopy(ctx, req, rep, args.Fork, incarnation, &plan[i]); err != nil {
			return nil, s.rollback(ctx, req, rep, args.Fork, incarnation, err)
		}
	}
	copied := s.cfg.Now()
	crashpoint.HitOnce(CrashBeforeCommit)
	if err := crashpoint.FailOnce(CrashFailBeforeCommit); err != nil {
		return nil, s.rollback(ctx, req, rep, args.Fork, incarnation, retryable(err)) // tests: a passing fault before the commit
	}
	if err := s.commitFork(ctx, req, args, incarnation, plan); err != nil {
		return nil, s.rollback(ctx, req, rep, args.Fork, incarnation, err)
	}
	request.Report(ctx, rep, "workspace "+args.Fork, "created", fmt.Sprintf("fork of %s with %d datatable(s) (checks %s and cleanup %s, copies %s, commit %s)",
		args.Parent, len(plan), ms(planned.Sub(begun)), ms(checked.Sub(planned)), ms(copied.Sub(checked)), ms(s.cfg.Now().Sub(copied))))
	return s.prepare(ctx, rep, &ForkResult{Workspace: args.Fork, Parent: args.Parent, Datatables: plan, SharedLakes: args.SharedLakes, pin: args.PinLakes})
}

// prepare runs the Pinner (pin_lakes) and the Preparer on a committed fork.
func (s *Service) prepare(ctx context.Context, rep request.Reporter, res *ForkResult) (*ForkResult, error) {
	if res.pin && s.cfg.Pinner != nil {
		pins, err := s.cfg.Pinner.PinFork(ctx, res.Workspace, rep)
		if err != nil {
			return nil, fmt.Errorf("fork %q was created, but pinning its lake reads failed (SELECT dataenv.repin_fork(%q) retries it): %w",
				res.Workspace, res.Workspace, err)
		}
		res.Pins = pins
	}
	if s.cfg.Preparer == nil {
		return res, nil
	}
	p, err := s.cfg.Preparer.PrepareFork(ctx, res.Workspace, rep)
	if err != nil {
		return nil, fmt.Errorf("fork %q was created, but preparing it for use failed (SELECT dataenv.prepare_connection(%q) retries it): %w",
			res.Workspace, res.Workspace, err)
	}
	res.Prepared = p
	return res, nil
}

// plan checks the parent and the requester's membership (as read), and resolves the parent's
// datatables.
func (s *Service) plan(ctx context.Context, req *request.Request, args createArgs, reads *forkReads) ([]planItem, error) {
	if err := reads.parentErr; err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return nil, request.Refusef("create_fork: no workspace %q", args.Parent)
		}
		return nil, err
	}
	if reads.canUseErr != nil {
		return nil, reads.canUseErr
	}
	if !reads.canUse {
		return nil, request.Refusef("create_fork: %s is not a member of workspace %q", req.RequestedBy, args.Parent)
	}
	if reads.dtErr != nil {
		return nil, reads.dtErr
	}
	plan := make([]planItem, 0, len(reads.datatables))
	known := map[string]bool{}
	for _, d := range reads.datatables {
		known[d.Datatable] = true
		item := planItem{Datatable: d.Datatable, Mode: args.Datatables[d.Datatable], Cluster: d.Cluster,
			Database: d.Database, ParentDatabase: d.Database, Source: d.ResolvedFrom}
		if item.Mode == "" {
			item.Mode = ModeKeepOriginal
		}
		if item.Mode != ModeKeepOriginal {
			item.Database = names.ForkDatabase(args.Fork, d.Datatable)
		}
		plan = append(plan, item)
	}
	for name := range args.Datatables {
		if !known[name] {
			return nil, request.Refusef("create_fork: workspace %q has no datatable %q", args.Parent, name)
		}
	}
	// A copy reads the parent's database as the cluster's admin: never one no binding may reach.
	// Checked here (a database that passed within bindableTTL is not connected to again) so that
	// a refused fork changes nothing, and again on the connection the copy reads the parent with
	// (readPlanWithOwner).
	for _, it := range plan {
		if it.Mode != ModeKeepOriginal {
			if err := s.cfg.Clusters.CheckBindableRecent(ctx, it.Cluster, it.ParentDatabase); err != nil {
				return nil, fmt.Errorf("create_fork: datatable %q: %w", it.Datatable, err)
			}
		}
	}
	return plan, nil
}

// discardedOf says whether registry row c is a copy its own request set aside under its
// discarded name (names.DiscardedForkCopy): release 2794061 took a spare before it knew the
// parent's schema and set the copy aside when the schema had changed. A request of that release
// interrupted then and run again by this one finds such a row, which is stale.
func discardedOf(c Copy) bool {
	return c.Database == names.DiscardedForkCopy(c.Workspace, c.Datatable, c.Request.String())
}

// cleanupPreviousIncarnation retries the cleanup of copies a previous fork with this id left
// (and other areas' leftovers), and refuses to go on while any of it fails: a new fork must never
// silently reattach stale data.
func (s *Service) cleanupPreviousIncarnation(ctx context.Context, rep request.Reporter, req *request.Request, fork string, reads *forkReads) error {
	var stale []Copy
	for _, c := range reads.copies {
		if c.Request != req.ID || discardedOf(c) { // an earlier release's discarded copy too
			stale = append(stale, c)
		}
	}
	if len(stale) > 0 {
		request.Report(ctx, rep, "previous incarnation of "+fork, "started", fmt.Sprintf("%d fork copies left by an earlier fork %s or an earlier attempt: dropping them first", len(stale), fork))
	}
	// A cleanup that failed for a transient fault (a terminated session, a restarting server) is
	// retried as a new attempt; one a person must act on refuses the fork.
	if err := s.dropTemplates(ctx, rep, reads.templates); err != nil {
		if request.IsTransient(err) {
			return retryable(fmt.Errorf("create_fork: schema templates left by an earlier fork %q: %w", fork, err))
		}
		return request.Refusef("create_fork: an earlier fork %q left schema templates that cannot be dropped yet (%v); the fork is not created until they are", fork, err)
	}
	if _, failed := s.dropCopies(ctx, rep, stale); len(failed) > 0 {
		if allTransient(failed) {
			return retryable(fmt.Errorf("create_fork: copies left by an earlier fork %q: %s", fork, failureText(failed)))
		}
		return request.Refusef("create_fork: an earlier fork %q left copies that cannot be dropped yet (%s); the fork is not created until they are",
			fork, failureText(failed))
	}
	for _, c := range s.cfg.Cleaners {
		if err := c.CleanupFork(ctx, fork, rep); err != nil && s.cfg.BlocksCreate(err) {
			return fmt.Errorf("create_fork: the cleanup of an earlier fork %q failed; the fork is not created until it succeeds: %w", fork, err)
		}
	}
	return nil
}

// rollback drops every copy this request made, so that a failed create_fork leaves nothing
// behind. It returns cause, with what could not be cleaned up. A cleanup stopped by a transient
// fault makes the request retry (the next attempt makes the fork again, or fails again and
// rolls back again): a fork that failed for good must not leave its copies and roles to a later
// create_fork or drop_fork of the same id, which may never come. Registry rows of copies whose
// drop failed for good stay, and such a later request retries them.
func (s *Service) rollback(ctx context.Context, req *request.Request, rep request.Reporter, fork string, incarnation time.Time, cause error) error {
	ctx = context.WithoutCancel(ctx)
	copies, err := Copies(ctx, s.cfg.Control, fork)
	if err != nil {
		return fmt.Errorf("%w (and its copies could not be listed for cleanup: %v)", cause, err)
	}
	var mine []Copy
	for _, c := range copies {
		if c.Request == req.ID {
			mine = append(mine, c)
		}
	}
	if _, failed := s.dropCopies(ctx, rep, mine); len(failed) > 0 {
		if allTransient(failed) {
			return cleanupInterrupted(cause, errors.New(failureText(failed)))
		}
		return fmt.Errorf("%w (copies left registered for a later cleanup: %s)", cause, failureText(failed))
	}
	if err := s.dropForkRoles(ctx, rep, fork, incarnation); err != nil {
		if request.IsTransient(err) {
			return cleanupInterrupted(cause, err)
		}
		return fmt.Errorf("%w (the fork's workspace role is left for a later cleanup: %v)", cause, err)
	}
	return cause
}

// cleanupInterrupted is the error of a rollback that a transient fault stopped: retryable,
// whatever cause was (a refusal is named, not wrapped, so that it does not end the request
// with the cleanup undone).
func cleanupInterrupted(cause, err error) error {
	return retryable(fmt.Errorf("%v (its cleanup was interrupted and is retried: %w)", cause, err))
}

// requestCreatedAt is the create_fork request's created_at, read from the control database: the
// fork's incarnation (its workspace row's created_at, and what its workspace roles are made for
// before that row exists).
func requestCreatedAt(ctx context.Context, q control.Querier, req *request.Request) (time.Time, error) {
	var at time.Time
	if err := q.QueryRow(ctx, `SELECT created_at FROM dataenv.requests WHERE id = $1`, req.ID).Scan(&at); err != nil {
		return at, retryable(fmt.Errorf("read the created_at of request %s: %w", req.ID, err))
	}
	return at, nil
}

// commitFork creates the workspace row and its datatable entries in one transaction, under the
// lifecycle locks of the clusters they name (in name order); triggers of other areas add their
// rows (the lakes area stamps the fork's lakes).
func (s *Service) commitFork(ctx context.Context, req *request.Request, args createArgs, incarnation time.Time, plan []planItem) error {
	return pgx.BeginFunc(ctx, s.cfg.Control, func(tx pgx.Tx) error {
		// One round trip between BEGIN and COMMIT: no statement needs another's result, and the
		// first that fails ends the transaction (the server skips the rest).
		b := &pgx.Batch{}
		clusters := clustersOf(plan)
		for _, c := range clusters {
			lock.QueueXactLifecycle(b, c)
		}
		b.Queue(`SELECT EXISTS (SELECT FROM dataenv.workspaces WHERE id = $1 FOR KEY SHARE)`, args.Parent)
		// The expiry runs from the fork's creation, within the policy in force now. The fork's
		// lake entries are stamped by the AFTER INSERT trigger on dataenv.workspaces
		// (sqlapi/043_lake_forks.sql), in this same transaction.
		b.Queue(`INSERT INTO dataenv.workspaces (id, is_fork, parent, shared_lakes, created_by, created_by_request, created_at, expires_at)
			VALUES ($1, true, $2, $3, $4, $5, $6, dataenv.fork_expires_at($2, $7::interval))`,
			args.Fork, args.Parent, args.SharedLakes, req.RequestedBy, req.ID, incarnation, args.ExpiresIn)
		for i, it := range plan {
			b.Queue(`INSERT INTO dataenv.datatables (workspace, name, cluster, database, source, created_by)
				VALUES ($1, $2, $3, $4, $5, $6)`, args.Fork, it.Datatable, it.Cluster, it.Database, it.Mode, req.RequestedBy)
			if wantsTemplate(&plan[i]) {
				queueTemplateRefresh(b, it.Source, it.Datatable, req.RequestedBy)
			}
		}
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		for _, c := range clusters {
			if _, err := br.Exec(); err != nil {
				return retryable(fmt.Errorf("lifecycle lock of %q: %w", c, err))
			}
		}
		var parentThere bool
		if err := br.QueryRow().Scan(&parentThere); err != nil {
			return retryable(err)
		}
		if !parentThere {
			return request.Refusef("create_fork: workspace %q was dropped while its fork was being made", args.Parent)
		}
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("create workspace %q: %w", args.Fork, err)
		}
		for i, it := range plan {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("record datatable %q of fork %q: %w", it.Datatable, args.Fork, err)
			}
			if !wantsTemplate(&plan[i]) {
				continue
			}
			var id string
			if err := br.QueryRow().Scan(&id); err != nil {
				return retryable(fmt.Errorf("request the schema template of datatable %q: %w", it.Datatable, err))
			}
			noteTemplate(&plan[i], id)
		}
		return br.Close()
	})
}

// enqueueTemplate asks for the schema template of a schema_only copy that was restored from a
// dump (the parent's schema changed, or it had none), so that the next fork of an unchanged
// parent is a TEMPLATE copy, and for the next spare of the template a copy was made from
// (spare.go); the refresh runs as its own request, after this one.
func enqueueTemplate(ctx context.Context, tx pgx.Tx, req *request.Request, it *planItem) error {
	if !wantsTemplate(it) {
		return nil
	}
	id, err := enqueueTemplateRefresh(ctx, tx, it.Source, it.Datatable, req.RequestedBy)
	if err != nil {
		return err
	}
	noteTemplate(it, id)
	return nil
}

// wantsTemplate says whether copy it asks for a refresh of its schema template (enqueueTemplate).
func wantsTemplate(it *planItem) bool {
	if it.Mode != ModeSchemaOnly || it.Fidelity == nil || it.Source == "" {
		return false
	}
	return it.Method == MethodDump || (it.Method == MethodSchemaTemplate && it.Fidelity.SchemaTemplate != nil)
}

// noteTemplate puts the refresh request id asked for copy it in its result.
func noteTemplate(it *planItem, id string) {
	if it.Method == MethodDump {
		it.Fidelity.SchemaTemplate = &TemplateUse{Status: "building", Request: id}
	} else {
		it.Fidelity.SchemaTemplate.Request = id
	}
}

func clustersOf(plan []planItem) []string {
	seen := map[string]bool{}
	var out []string
	for _, it := range plan {
		if !seen[it.Cluster] {
			seen[it.Cluster] = true
			out = append(out, it.Cluster)
		}
	}
	sort.Strings(out)
	return out
}

// describe is the result of a fork this request already committed.
func (s *Service) describe(ctx context.Context, args createArgs) (*ForkResult, error) {
	dts, err := control.Datatables(ctx, s.cfg.Control, args.Fork)
	if err != nil {
		return nil, err
	}
	copies, err := Copies(ctx, s.cfg.Control, args.Fork)
	if err != nil {
		return nil, err
	}
	res := &ForkResult{Workspace: args.Fork, Parent: args.Parent, SharedLakes: args.SharedLakes}
	for _, d := range dts {
		it := planItem{Datatable: d.Datatable, Mode: d.Mode, Cluster: d.Cluster, Database: d.Database, Status: "unchanged"}
		for _, c := range copies {
			if c.Cluster == d.Cluster && c.Database == d.Database {
				it.ParentDatabase, it.Method, it.Fidelity = c.ParentDatabase, c.Method, c.Report
			}
		}
		res.Datatables = append(res.Datatables, it)
	}
	return res, nil
}

// withWorkspaceLock holds the advisory lock of a workspace id (lock.WorkspaceLocks) while fn
// runs, so create_fork, drop_fork and prepare_connection of one id never interleave.
func (s *Service) withWorkspaceLock(ctx context.Context, id string, fn func() error) error {
	w, err := s.cfg.WorkspaceLocks.Workspace(ctx, id)
	if err != nil {
		return retryable(err)
	}
	defer w.Close(ctx)
	return fn()
}
