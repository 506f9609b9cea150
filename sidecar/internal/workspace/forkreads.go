package workspace

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// forkReads is what a create_fork decides on before it changes anything: the fork's workspace
// row (a re-run after the commit), the parent's row, the requester's access to it and its
// datatables, the request's created_at (the fork's incarnation), and what an earlier fork of
// the id left (registered copies, schema templates). The reads do not depend on each other:
// they are made side by side, each on a connection of the pool, where one after the other they
// were a tenth of a small fork's time.
type forkReads struct {
	fork       *control.Workspace
	forkErr    error // control.ErrNotFound: no such workspace yet
	parentErr  error
	canUse     bool
	canUseErr  error
	datatables []control.Resolution
	dtErr      error
	createdAt  time.Time
	copies     []Copy
	templates  []schemaTemplate
}

// readFork makes the reads of a create_fork; an error is the first failed read's (the reads of
// the workspaces, the access and the datatables keep theirs, which plan weighs in its order).
func (s *Service) readFork(ctx context.Context, req *request.Request, args createArgs) (*forkReads, error) {
	pool := s.cfg.Control
	r := &forkReads{}
	var g errgroup.Group
	g.Go(func() error { r.fork, r.forkErr = control.ReadWorkspace(ctx, pool, args.Fork); return nil })
	g.Go(func() error { _, r.parentErr = control.ReadWorkspace(ctx, pool, args.Parent); return nil })
	g.Go(func() error {
		r.canUse, r.canUseErr = control.CanUse(ctx, pool, args.Parent, req.RequestedBy)
		return nil
	})
	g.Go(func() error { r.datatables, r.dtErr = control.Datatables(ctx, pool, args.Parent); return nil })
	g.Go(func() (err error) { r.createdAt, err = requestCreatedAt(ctx, pool, req); return err })
	g.Go(func() (err error) { r.copies, err = Copies(ctx, pool, args.Fork); return err })
	g.Go(func() (err error) { r.templates, err = templatesOf(ctx, pool, args.Fork, ""); return err })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return r, nil
}
