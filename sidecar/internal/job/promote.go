package job

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// KindPromote makes a fork's version of a lake table its parent's.
const KindPromote = "promote"

type promoteArgs struct {
	Fork   string `json:"fork"`
	Parent string `json:"parent"`
	Target string `json:"target"`
	Force  bool   `json:"force"`
}

// Promoted is the result of a promote request: the parent's materialization, and what the fork
// gave up to defer the table again.
type Promoted struct {
	Materialized
	Fork string `json:"fork"`
	// ForkRecordsForgotten counts the fork's materialization records of the table removed (0 on
	// a rerun that finds them gone).
	ForkRecordsForgotten int64 `json:"fork_records_forgotten"`
}

// handlePromote writes the fork's version of the target table into the parent's namespace as one
// snapshot, by a job of the parent's workspace role that reads the fork's namespace READ_ONLY
// (its role is given read access to it for the job, and loses it after); the write is
// materialize's (h.write: tagged with the request id, so a rerun records it without writing
// again) and is recorded as the parent's materialization with promoted_from. Then the fork drops
// its table (a job of the fork's role) and forgets its records of it, so it defers the table to
// the parent again, and the forks below the parent are refreshed.
func (h *Handlers) handlePromote(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args promoteArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	m := targetRE.FindStringSubmatch(args.Target)
	if m == nil || args.Fork == "" || args.Parent == "" {
		return nil, request.Refusef("promote: fork, parent and target ducklake://<lake>/<table> are required (got %q)", args.Target)
	}
	target := &lake.Target{Lake: m[1], Table: m[2], ReadFrom: args.Fork}
	done, err := h.recorded(ctx, req)
	if err != nil {
		return nil, err
	}
	out, _ := done.(*Materialized)
	if out == nil {
		if err := h.checkPromote(ctx, req, args); err != nil {
			return nil, err
		}
		out, err = h.promoteWrite(ctx, req, rep, args, target)
		if err != nil {
			return nil, err
		}
	} else {
		out.Notes = append(out.Notes, "the parent's table was written and recorded by an earlier attempt of this request; not repeated")
	}
	// Every attempt takes the read access back (an earlier one may have died holding it).
	if err := h.cfg.Resolver.RevokeSource(ctx, args.Parent, target, rep); err != nil {
		return nil, request.Retryable(err)
	}
	crashpoint.HitOnce("job.promote.after_write")
	forgot, err := h.deferAgain(ctx, req, rep, args, target)
	if err != nil {
		return nil, err
	}
	request.Reportf(ctx, rep, "fork "+args.Fork, "defers", "%s reads the parent's table again (%d record(s) forgotten)", args.Target, forgot)
	out.Notes = append(out.Notes, h.refreshDescendants(ctx, args.Parent, target.Lake, rep)...)
	return &Promoted{Materialized: *out, Fork: args.Fork, ForkRecordsForgotten: forgot}, nil
}

// checkPromote applies the SQL API's rules (dataenv.check_promote) as they stand now: the fork's
// parent is still args.Parent, the requester may use the fork, the lake isolated, the table materialized by the fork, the parent
// unprotected, and (unless force) the parent's table unchanged since the fork materialized it.
func (h *Handlers) checkPromote(ctx context.Context, req *request.Request, args promoteArgs) error {
	ws, err := control.ReadWorkspace(ctx, h.cfg.Control, args.Fork)
	if errors.Is(err, control.ErrNotFound) {
		return request.Refusef("promote: no workspace named %q", args.Fork)
	}
	if err != nil {
		return request.Retryable(err)
	}
	if !ws.IsFork || ws.Parent != args.Parent {
		return request.Refusef("promote: workspace %q is not a fork of %q", args.Fork, args.Parent)
	}
	// The policy checked that the requester owns the parent; the fork's rows are read for them,
	// so they must be able to use the fork too.
	ok, err := control.CanUse(ctx, h.cfg.Control, args.Fork, req.RequestedBy)
	if err != nil {
		return request.Retryable(err)
	}
	if !ok {
		return request.Refusef("promote: %s owns %q but may not use its fork %q, whose table a promote reads; the fork's owner grants it: SELECT dataenv.grant_workspace('%s', '%s')",
			req.RequestedBy, args.Parent, args.Fork, args.Fork, req.RequestedBy)
	}
	_, err = h.cfg.Control.Exec(ctx, `SELECT dataenv.check_promote($1, $2, $3, $4)`, args.Fork, args.Parent, args.Target, args.Force)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "55000" || pe.Code == "22023" || pe.Code == "42501") {
		if pe.Hint != "" {
			return request.Refusef("%s (%s)", pe.Message, pe.Hint)
		}
		return request.Refusef("%s", pe.Message)
	}
	return request.Retryable(err)
}

// promoteWrite is the parent's job: materialize's write of SELECT * FROM the fork's table.
func (h *Handlers) promoteWrite(ctx context.Context, req *request.Request, rep request.Reporter, args promoteArgs, target *lake.Target) (*Materialized, error) {
	lim, err := h.limits(ctx, args.Parent, 0)
	if err != nil {
		return nil, err
	}
	// However the resolution or the job ends, the access it gave is taken back (the caller does
	// it again, and fails the attempt when it cannot, once the write is recorded).
	defer func() {
		if rerr := h.cfg.Resolver.RevokeSource(context.WithoutCancel(ctx), args.Parent, target, rep); rerr != nil {
			h.log.Warn("promote: take back the parent's read access to the fork", "fork", args.Fork, "error", rerr)
		}
	}()
	plan, err := h.cfg.Resolver.Resolve(ctx, args.Parent, "", target, rep)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	request.Report(ctx, rep, "resolve", "done", "the parent's job reads the fork's namespace "+plan.Source.SchemaName())
	margs := materializeArgs{Workspace: args.Parent, Target: args.Target, Strategy: StrategyReplace, promotedFrom: args.Fork}
	query := "SELECT * FROM " + lake.Ident(lake.SourceAlias(target.Lake, args.Fork)) + "." + lake.Ident(target.Table)
	return h.write(ctx, req, rep, plan, lim, margs, query)
}

const forkRecordsSQL = `SELECT count(*) FROM dataenv.materializations WHERE workspace = $1 AND lake = $2 AND table_name = $3`

const forgetForkRecordsSQL = `DELETE FROM dataenv.materializations WHERE workspace = $1 AND lake = $2 AND table_name = $3`

// deferAgain drops the fork's own table of target in its namespace (a job of the fork's role,
// one DuckLake commit) and then its materialization records of it: with neither, the fork's next
// job (or the refresh of the parent's forks) makes the defer view to the parent. In that order,
// so that a crash in between leaves records without a table, which a rerun finishes; records
// gone mean the drop happened.
func (h *Handlers) deferAgain(ctx context.Context, req *request.Request, rep request.Reporter, args promoteArgs, target *lake.Target) (int64, error) {
	var n int64
	if err := h.cfg.Control.QueryRow(ctx, forkRecordsSQL, args.Fork, target.Lake, target.Table).Scan(&n); err != nil {
		return 0, request.Retryable(err)
	}
	if n == 0 {
		return 0, nil
	}
	lim, err := h.limits(ctx, args.Fork, 0)
	if err != nil {
		return 0, err
	}
	if lim.Timeout < h.cfg.Limits.Timeout {
		lim.Timeout = h.cfg.Limits.Timeout
		lim.from[client.LimitTimeout] = "the installation's default (dataenv sidecar --job-timeout), which dataenv's own steps of a promote always get"
	}
	plan, err := h.cfg.Resolver.Resolve(ctx, args.Fork, "", &lake.Target{Lake: target.Lake, Table: target.Table}, rep)
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	alias := lake.Ident(plan.TargetAlias)
	drop := fmt.Sprintf("BEGIN TRANSACTION;\nDROP TABLE IF EXISTS %s.%s;\nCALL %s.set_commit_message('dataenv', %s, extra_info => %s);\nCOMMIT",
		alias, lake.Ident(target.Table), alias, lake.Literal("promote "+args.Target+" into "+args.Parent+": the fork defers it again"),
		lake.Literal(`{"dataenv_request":"`+req.ID.String()+`","step":"fork_drop"}`))
	if _, err := h.runJob(ctx, plan, lim, []string{plan.SQL, drop}, true, 0); err != nil {
		return 0, fmt.Errorf("promote: drop the fork's table %s: %w", args.Target, err)
	}
	tag, err := h.cfg.Control.Exec(ctx, forgetForkRecordsSQL, args.Fork, target.Lake, target.Table)
	if err != nil {
		return 0, request.Retryable(fmt.Errorf("promote: forget the fork's records of %s: %w", args.Target, err))
	}
	return tag.RowsAffected(), nil
}
