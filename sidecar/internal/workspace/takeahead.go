package workspace

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/names"
)

// errNotTakenAhead: takeAhead took no spare (none was ready, the template was being built, or
// the spare went to another request first); the copy is made the usual way.
var errNotTakenAhead = errors.New("no spare taken ahead of the plan's head")

// takeAhead makes a schema_only copy whose workspace has no role on the cluster yet (c.adopt)
// by taking the spare of its entry's newest schema template, with the spare's role, while the
// parent's session starts and the plan's head (the schema fingerprint) is read: on a small
// parent the take costs about as much as the head, and for an unchanged parent, the usual case,
// neither waits for the other. Once the head is read, the copy is kept if the template's
// fingerprint is the parent's and the admin may read every table. Otherwise (the parent's schema
// changed since its template was built) the copy is discarded (discardTaken) and made again from
// the head the usual way (a dump), with the role the take gave the workspace. A nil job and error:
// nothing is kept, and the caller makes the copy the usual way, and drops the discarded copy, if
// any, meanwhile (dropDiscard).
func (s *Service) takeAhead(ctx context.Context, rep request.Reporter, c *Copy, it *planItem, reading *planReading) (*copyJob, *Copy, error) {
	created := newPhaseTimes(s.cfg.Now)
	job, err := s.startCopy(ctx, rep, *c, it, nil, created)
	if errors.Is(err, errNotTakenAhead) {
		return nil, nil, s.undoTakeAhead(ctx, rep, c)
	}
	if err != nil {
		return nil, nil, err
	}
	head, err := reading.Head()
	if err != nil {
		job.close(ctx)
		return nil, nil, err // the fork's rollback drops the copy
	}
	if head.Fingerprint == job.template.Fingerprint && len(head.Unreadable) == 0 {
		created.mark("taken ahead of the plan's head, which found the schema unchanged")
		job.phases = created
		return job, nil, nil
	}
	if job.conn != nil { // gone from the server before the rename, which no session may see
		closeAwaitingExit(ctx, job.conn)
		job.conn = nil
	}
	job.close(ctx)
	why := fmt.Sprintf("the schema of %s changed since its schema template %s was built", it.ParentDatabase, job.template.Database)
	if head.Fingerprint == job.template.Fingerprint {
		why = "the cluster's admin may not read every table of " + it.ParentDatabase
	}
	request.Report(ctx, rep, fmt.Sprintf("copy datatable %s (%s)", it.Datatable, it.Mode), "restarted",
		why+": the spare taken for the copy is set aside, dropped while the copy is made from the parent")
	discarded, err := s.discardTaken(ctx, rep, c, job.method)
	return nil, discarded, err
}

// undoTakeAhead drops what a take that took no spare registered of copy c (errNotTakenAhead:
// a registry row at most, or a database made by an earlier attempt's take), so that the copy is
// made the usual way, with the workspace role made then (c.adopt is spent) and a session of its
// own.
func (s *Service) undoTakeAhead(ctx context.Context, rep request.Reporter, c *Copy) error {
	c.adopt, c.maint = nil, nil
	row, err := readCopy(ctx, s.cfg.Control, c.Cluster, c.Database)
	if err != nil || row == nil || row.Request != c.Request {
		return err // another request's row is refused by the usual way
	}
	return s.dropCopy(ctx, rep, *row)
}

// discardTaken renames copy c, taken ahead and found not to be the parent's schema, to its
// discarded name (names.DiscardedForkCopy), so that the copy can be made again under its own
// name at once while the discarded database is dropped (a DROP DATABASE costs a checkpoint). The
// discarded name is registered before the rename, state dropping, and c's registry row goes in
// the control transaction that moves the database's record: whatever an interruption leaves
// (the rename not made, made and not recorded, or recorded) is dropped through the rows the
// request's rollback or its next attempt finds (cleanupPreviousIncarnation, ensureCopy). The
// workspace role the take made stays the workspace's role (c.adopt is spent).
func (s *Service) discardTaken(ctx context.Context, rep request.Reporter, c *Copy, method string) (*Copy, error) {
	c.adopt, c.maint = nil, nil
	d := *c
	d.Database, d.Method, d.State = names.DiscardedForkCopy(c.Workspace, c.Datatable, c.Request.String()), method, StateDropping
	err := s.cfg.Clusters.WithLifecycleLock(ctx, c.Cluster, rep, func(ctx context.Context, l *cluster.Locked) error {
		if err := registerCopy(ctx, l.Control(), d); err != nil {
			return err
		}
		crashpoint.HitOnce(CrashDiscardRegistered)
		return l.RenameMarkedDatabase(ctx, c.Database, d.Database, c.Request, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `DELETE FROM dataenv.fork_copies WHERE cluster = $1 AND database = $2 AND created_by_request = $3`,
				c.Cluster, c.Database, c.Request)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("set aside the copy %q taken ahead of the plan: %w", c.Database, err)
	}
	return &d, nil
}

// discardedOf says whether registry row c is a copy its own request discarded (discardTaken).
func discardedOf(c Copy) bool {
	return c.Database == names.DiscardedForkCopy(c.Workspace, c.Datatable, c.Request.String())
}

// aside is the drop of a discarded copy, running while the copy is made again.
type aside struct {
	done chan struct{}
	err  error
}

// dropDiscard starts dropping the copy job set aside, if any and not started yet: once the
// lifecycle-lock sections that make and size the new copy are over (the drop holds the lock
// through DROP DATABASE and its checkpoint), while the copy is loaded and finished.
func (s *Service) dropDiscard(ctx context.Context, rep request.Reporter, job *copyJob) {
	if job.discard == nil || job.discarded != nil {
		return
	}
	a, d := &aside{done: make(chan struct{})}, *job.discard
	go func() {
		defer close(a.done)
		if err := s.dropCopy(ctx, rep, d); err != nil {
			a.err = fmt.Errorf("drop the discarded copy %q: %w", d.Database, err)
		}
	}()
	job.discarded = a
}

// wait waits for the drop (nil: none was started).
func (a *aside) wait() error {
	if a == nil {
		return nil
	}
	<-a.done
	return a.err
}
