package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// copyOwner is the role that owns a copy (the database and everything in it) and how a restore
// reaches the cluster as that role.
type copyOwner struct {
	Role string
	// libpq is the libpq environment of a database as Role (restores run as the owner, never as
	// the admin); valid only while the cluster's lifecycle lock that produced it is held. The
	// caller closes the environment.
	libpq func(ctx context.Context, database string) (*cluster.Libpq, error)
}

// forkOwnerOf is the one place that says which role owns workspace's copies on a cluster
// (../shared/DESIGN.md, "Ownership in fork copies"): the workspace's own managed role on that
// cluster (cluster.Locked.EnsureWorkspaceRoleAt: the fork's workspace row is committed only
// after its copies are made, with created_at = incarnation). Every copy method maps the
// parent's owner roles to what this returns; nothing else in the package names the role. The
// copy's database is recorded for the role (NoteWorkspaceDatabase) before it is created.
func forkOwnerOf(ctx context.Context, l *cluster.Locked, workspace string, incarnation time.Time, database string) (copyOwner, error) {
	role, err := l.EnsureWorkspaceRoleAt(ctx, workspace, incarnation)
	if err != nil {
		return copyOwner{}, err
	}
	if err := l.NoteWorkspaceDatabase(ctx, workspace, database); err != nil {
		return copyOwner{}, err
	}
	return copyOwner{Role: role.Name, libpq: func(ctx context.Context, database string) (*cluster.Libpq, error) {
		return l.WorkspaceLibpqAt(ctx, workspace, incarnation, database)
	}}, nil
}

// readPlanWithOwner starts reading the parent's plan (mode c.Mode) while the fork's owner role is
// made on c's cluster and the copy's database noted for it: they do not depend on each other, and
// on a small parent the role's CREATE ROLE and records cost as much as the plan's reads. One
// lifecycle-lock section fences the cluster, starts opening the connection to the parent (on
// which it is checked that no binding is refused the parent: ConnectBindableAhead), and makes the
// role while the session starts; the plan is read on that connection, outside the lock, and
// forkOwnerOf under the copy's lock then finds the role made (the role cache) and checks it
// again. It returns once the role is made and the plan's head is read (planReading.Head); a
// schema_only copy's database is then created while the rest is read. A failed plan read is the
// error returned first; whatever the role step made is dropped by the fork's rollback like any of
// its roles. On error the read is over.
//
// A schema_only copy whose workspace has no role on the cluster yet, of an entry (source's
// datatable) whose template has a spare with a role, makes no role: it prepares to take the
// spare's (cluster.Locked.PrepareAdoption, c.adopt), and the copy makes the role only if it takes
// no spare after all.
func (s *Service) readPlanWithOwner(ctx context.Context, rep request.Reporter, c *Copy, source string, times *readTimes) (*planReading, error) {
	r := &planReading{head: make(chan *parentPlan, 1), done: make(chan planRead, 1)}
	reading := false
	begun := s.cfg.Now()
	ownerErr := s.cfg.Clusters.WithLifecycleLock(ctx, c.Cluster, rep, func(lctx context.Context, l *cluster.Locked) error {
		times.locked = s.cfg.Now().Sub(begun)
		if err := l.Fence(lctx); err != nil { // so that the sessions below open in the background
			return err
		}
		parent := l.ConnectBindableAhead(ctx, c.ParentDatabase)
		reading = true
		// The session that makes the role makes the copy's database too (createCopyDatabase).
		c.maint = l.ConnectAhead(ctx, "")
		l.UseSession(c.maint)
		go s.readPlanFrom(ctx, r, parent, *c, times, begun)
		var err error
		if c.adopt, err = prepareAdoption(lctx, l, *c, source); err == nil && c.adopt == nil {
			_, err = forkOwnerOf(lctx, l, c.Workspace, c.incarnation, c.Database)
		}
		times.role = s.cfg.Now().Sub(begun) - times.locked
		return err
	})
	if !reading {
		return nil, ownerErr
	}
	if _, err := r.Head(); err != nil {
		return nil, err
	}
	if ownerErr != nil {
		_, _ = r.Plan()
		return nil, ownerErr
	}
	return r, nil
}

// readPlanFrom reads copy c's plan on the parent's connection once it is open, and hands it to r.
func (s *Service) readPlanFrom(ctx context.Context, r *planReading, parent *cluster.Dial, c Copy, times *readTimes, begun time.Time) {
	conn, err := parent.Conn()
	connected := s.cfg.Now()
	times.connected = connected.Sub(begun) - times.locked
	if err != nil {
		r.done <- planRead{nil, err}
		return
	}
	p, err := readPlanOn(ctx, conn, c.ParentDatabase, c.Mode, func(head *parentPlan) {
		times.head = s.cfg.Now().Sub(connected)
		r.head <- head
	})
	times.plan = s.cfg.Now().Sub(connected)
	// Closed before the plan is handed over; a full_copy's TEMPLATE copy of the parent needs its
	// session gone from the server, not just closed.
	if c.Mode == ModeFullCopy {
		closeAwaitingExit(ctx, conn)
	} else {
		_ = conn.Close(context.WithoutCancel(ctx))
	}
	r.done <- planRead{p, err}
}

// planRead is the outcome of a plan read.
type planRead struct {
	plan *parentPlan
	err  error
}

// planReading is a plan being read on the parent by a goroutine of readPlanWithOwner. Its owner
// calls Plan before it returns, whatever happens, so that the read is over and the parent's
// connection closed.
type planReading struct {
	head   chan *parentPlan // the head of a schema_only plan, sent while the rest is read
	done   chan planRead
	first  *parentPlan // what Head returned
	result *planRead
}

// Head is what the copy's database is created from: the head of a schema_only plan
// (parentPlan.head), whose rest may still be being read, else the whole plan.
func (r *planReading) Head() (*parentPlan, error) {
	if r.first != nil {
		return r.first, nil
	}
	select {
	case r.first = <-r.head:
		return r.first, nil
	case d := <-r.done:
		r.result = &d
		r.first = d.plan
		return d.plan, d.err
	}
}

// Plan waits for the whole plan.
func (r *planReading) Plan() (*parentPlan, error) {
	if r.result == nil {
		d := <-r.done
		r.result = &d
	}
	return r.result.plan, r.result.err
}

// spareWithRoleSQL: the entry ($1, $2) has a ready spare with a role on cluster $3.
const spareWithRoleSQL = `SELECT EXISTS (SELECT FROM dataenv.schema_templates
	WHERE workspace = $1 AND datatable = $2 AND cluster = $3 AND spare_of IS NOT NULL AND state = 'ready' AND role IS NOT NULL)`

// prepareAdoption prepares copy c (schema_only) to take a spare of source's entry with its role
// as the workspace's role; nil when the entry has no such spare or the workspace has a role on
// the cluster. The copy's database is noted for the role, as forkOwnerOf notes it.
func prepareAdoption(ctx context.Context, l *cluster.Locked, c Copy, source string) (*cluster.Adoption, error) {
	if c.Mode != ModeSchemaOnly {
		return nil, nil
	}
	var spare bool
	if err := l.Control().QueryRow(ctx, spareWithRoleSQL, source, c.Datatable, c.Cluster).Scan(&spare); err != nil {
		return nil, retryable(fmt.Errorf("look for a spare of %s/%s: %w", source, c.Datatable, err))
	}
	if !spare {
		return nil, nil
	}
	a, err := l.PrepareAdoption(ctx, c.Workspace, c.incarnation)
	if err != nil || a == nil {
		return nil, err
	}
	return a, l.NoteWorkspaceDatabase(ctx, c.Workspace, c.Database)
}

// readTimes is where readPlanWithOwner's time went, for the copy's "done" step: the parent's
// connection and plan read run side by side with the role; head is when a schema_only plan's
// head was read (the copy's database is then made while the rest is read).
type readTimes struct{ locked, connected, head, plan, role time.Duration }

func (t *readTimes) String() string {
	plan := fmt.Sprintf("plan %s", ms(t.plan))
	if t.head > 0 {
		plan = fmt.Sprintf("plan's head %s (the rest read by %s, alongside the database's creation)", ms(t.head), ms(t.plan))
	}
	return fmt.Sprintf("lifecycle lock %s, parent connected and checked %s, then %s; alongside, the fork's role %s",
		ms(t.locked), ms(t.connected), plan, ms(t.role))
}

// templateOwnerOf is the role that owns a schema template's objects: the cluster's application
// role, which no workspace acts as (workspace roles are not its members). A template is copied
// into every fork of its datatable, and each copy is then re-owned by that fork's owner.
func templateOwnerOf(_ context.Context, l *cluster.Locked) (copyOwner, error) {
	return copyOwner{Role: l.Cluster().AppRole, libpq: l.AppLibpq}, nil
}

// dropForkRoles drops the workspace roles a create_fork that failed made for its incarnation on
// the clusters they were made on (its copies are dropped first): a fork that was never committed
// keeps no role. A role recorded for another incarnation is left to the cleanups of that one.
func (s *Service) dropForkRoles(ctx context.Context, rep request.Reporter, fork string, incarnation time.Time) error {
	rows, err := s.cfg.Control.Query(ctx, `SELECT cluster FROM dataenv.workspace_roles WHERE workspace = $1 AND incarnation = $2 ORDER BY 1`,
		fork, incarnation)
	if err != nil {
		return retryable(fmt.Errorf("list the roles of fork %q: %w", fork, err))
	}
	var clusters []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return retryable(err)
		}
		clusters = append(clusters, c)
	}
	if err := rows.Err(); err != nil {
		return retryable(err)
	}
	var errs []error
	for _, c := range clusters {
		if err := s.cfg.Clusters.WithLifecycleLock(ctx, c, rep, func(ctx context.Context, l *cluster.Locked) error {
			if err := crashpoint.FailOnce(CrashFailRollbackRoleDrop); err != nil {
				return retryable(err) // tests: a transient fault in a failed fork's cleanup
			}
			return l.DropWorkspaceRole(ctx, fork)
		}); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}
