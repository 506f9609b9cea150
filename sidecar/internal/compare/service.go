package compare

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/request"
	"github.com/dataenv/dataenv/sidecar/internal/workspace"
	"github.com/dataenv/dataenv/sidecar/names"
)

// KindCompareFork is the request kind dataenv.compare_fork makes.
const KindCompareFork = "compare_fork"

// maxDifferences bounds the differences listed per datatable (the result is a jsonb value a
// person reads); Truncated says when more were found.
const maxDifferences = 1000

// Config configures a Service.
type Config struct {
	// Control is the pool of the control database (the role that owns the dataenv schema).
	Control *pgxpool.Pool
	// Clusters reaches the clusters as their admin.
	Clusters *cluster.Admin
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service performs compare_fork requests.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Control == nil || cfg.Clusters == nil {
		return nil, errors.New("compare.New: Config.Control and Config.Clusters are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "compare")}, nil
}

// Register registers the compare_fork handler.
func (s *Service) Register(reg *request.Registry) { reg.Register(KindCompareFork, handler{s}) }

// handler is stateless: a comparison changes nothing, so running it again after a crash is
// harmless and it is never claimed.
type handler struct{ s *Service }

func (handler) Stateless() bool { return true }

func (h handler) Handle(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	return h.s.compareFork(ctx, req, rep)
}

// Result is the result of a compare_fork request.
type Result struct {
	Fork       string            `json:"fork"`
	Parent     string            `json:"parent"`
	Datatables []DatatableResult `json:"datatables"`
	Lakes      []LakeResult      `json:"lakes"`
}

// DatatableResult is one datatable of the fork.
type DatatableResult struct {
	Datatable      string `json:"datatable"`
	Mode           string `json:"mode"`
	Cluster        string `json:"cluster"`
	Database       string `json:"database"`
	ParentDatabase string `json:"parent_database,omitempty"`
	// Status: compared, unchanged (no difference), truncated (more than maxDifferences), shared
	// (keep_original: the parent's database itself), own (bound to the fork with add_datatable),
	// or no_parent (the parent, or its datatable of that name, is gone).
	Status      string       `json:"status"`
	Note        string       `json:"note,omitempty"`
	Differences []Difference `json:"differences"`
	Truncated   bool         `json:"truncated,omitempty"`
}

func (s *Service) compareFork(ctx context.Context, req *request.Request, rep request.Reporter) (*Result, error) {
	var args struct {
		Fork string `json:"fork"`
	}
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	pool := s.cfg.Control
	ws, err := control.ReadWorkspace(ctx, pool, args.Fork)
	if errors.Is(err, control.ErrNotFound) {
		return nil, request.Refusef("compare_fork: no workspace %q", args.Fork)
	}
	if err != nil {
		return nil, request.Retryable(err)
	}
	if !ws.IsFork {
		return nil, request.Refusef("compare_fork: workspace %q is not a fork: there is no parent to compare it with", args.Fork)
	}
	// The comparison shows the parent's current schema and records: only to who may use it.
	if ws.Parent != "" {
		ok, err := control.CanUse(ctx, pool, ws.Parent, req.RequestedBy)
		if err != nil {
			return nil, request.Retryable(err)
		}
		if !ok {
			return nil, request.Refusef("compare_fork: %s may use fork %q but not its parent %q, whose current state a comparison shows; "+
				"the parent's owner grants it: SELECT dataenv.grant_workspace(%s, %s)", req.RequestedBy, args.Fork, ws.Parent,
				quote(ws.Parent), quote(req.RequestedBy))
		}
	}
	res := &Result{Fork: args.Fork, Parent: ws.Parent, Datatables: []DatatableResult{}}
	dts, err := control.Datatables(ctx, pool, args.Fork)
	if err != nil {
		return nil, request.Retryable(err)
	}
	for _, d := range dts {
		dr, err := s.compareDatatable(ctx, ws.Parent, d)
		if err != nil {
			return nil, err
		}
		request.Report(ctx, rep, "datatable "+d.Datatable, dr.Status, fmt.Sprintf("%d difference(s)", len(dr.Differences)))
		res.Datatables = append(res.Datatables, dr)
	}
	if res.Lakes, err = readLakes(ctx, pool, args.Fork, ws.Parent); err != nil {
		return nil, request.Retryable(err)
	}
	return res, nil
}

// compareDatatable compares a datatable of the fork with the parent's datatable of that name.
func (s *Service) compareDatatable(ctx context.Context, parent string, d control.Resolution) (DatatableResult, error) {
	dr := DatatableResult{Datatable: d.Datatable, Mode: d.Mode, Cluster: d.Cluster, Database: d.Database, Differences: []Difference{}}
	switch d.Mode {
	case workspace.ModeSchemaOnly, workspace.ModeFullCopy:
	case workspace.ModeKeepOriginal:
		dr.Status, dr.Note = "shared", "keep_original: the fork uses the parent's database itself, nothing to compare"
		return dr, nil
	default: // configured: bound to the fork itself with add_datatable
		dr.Status, dr.Note = "own", "bound to the fork itself (no copy of the parent's), nothing to compare"
		return dr, nil
	}
	if parent == "" {
		dr.Status, dr.Note = "no_parent", "the fork's parent is gone: nothing to compare the copy with"
		return dr, nil
	}
	p, err := control.ResolveDatatable(ctx, s.cfg.Control, parent, d.Datatable)
	if errors.Is(err, control.ErrNotFound) {
		dr.Status, dr.Note = "no_parent", fmt.Sprintf("the parent %s has no datatable %s any more: nothing to compare the copy with", parent, d.Datatable)
		return dr, nil
	}
	if err != nil {
		return dr, request.Retryable(err)
	}
	dr.ParentDatabase = p.Database
	// The parent is read as the cluster's admin: never a database no binding may reach.
	if err := s.cfg.Clusters.CheckBindable(ctx, p.Cluster, p.Database); err != nil {
		return dr, fmt.Errorf("compare_fork: datatable %q: %w", d.Datatable, err)
	}
	before, err := s.snapshot(ctx, p.Cluster, p.Database)
	if err != nil {
		return dr, fmt.Errorf("compare_fork: datatable %q: the parent's database %q: %w", d.Datatable, p.Database, err)
	}
	after, err := s.snapshot(ctx, d.Cluster, d.Database)
	if err != nil {
		return dr, fmt.Errorf("compare_fork: datatable %q: the fork's database %q: %w", d.Datatable, d.Database, err)
	}
	dr.Status = "compared"
	dr.Differences = Diff(before, after)
	switch {
	case len(dr.Differences) > maxDifferences:
		dr.Status, dr.Note = "truncated", fmt.Sprintf("%d differences; the first %d are listed", len(dr.Differences), maxDifferences)
		dr.Differences, dr.Truncated = dr.Differences[:maxDifferences], true
	case len(dr.Differences) == 0:
		dr.Status, dr.Note = "unchanged", "the copy's schema is the parent's"
	}
	return dr, nil
}

// snapshotSettings bound the read: a catalog lock held by someone else's DDL must not hold the
// request forever.
const snapshotSettings = `SET LOCAL lock_timeout = '10s'; SET LOCAL statement_timeout = '120s'`

// snapshot reads database's schema objects as the cluster's admin (search_path pinned by the
// cluster package), in one read-only repeatable-read transaction.
func (s *Service) snapshot(ctx context.Context, cl, database string) ([]Object, error) {
	conn, err := s.cfg.Clusters.Connect(ctx, cl, database)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var objs []Object
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, snapshotSettings); err != nil {
			return err
		}
		var err error
		objs, err = ReadSnapshot(ctx, tx, names.Marker)
		return err
	})
	if err != nil {
		return nil, err
	}
	return objs, nil
}

// quote is s as an SQL string literal, for the statements an error suggests.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
