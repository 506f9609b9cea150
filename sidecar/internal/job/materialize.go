package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/runner/protocol"
	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Strategies of materialize.
const (
	StrategyReplace = "replace"
	StrategyAppend  = "append"
)

type materializeArgs struct {
	Workspace      string `json:"workspace"`
	Target         string `json:"target"`
	Query          string `json:"query"`
	Strategy       string `json:"strategy"`
	MaxResultBytes int64  `json:"max_result_bytes"`
	// SeedFromParent: an append onto a table the fork reads from an ancestor (a defer view)
	// starts the fork's table from those rows. Default true; false starts it empty.
	SeedFromParent *bool `json:"seed_from_parent"`
	// TimeoutSeconds asks for a timeout shorter than the workspace's.
	TimeoutSeconds float64 `json:"timeout_seconds"`
	// promotedFrom: the write is a promote's, of this fork's version of the table (recorded).
	promotedFrom string
}

// seed reports whether an append onto a deferred table starts from the ancestor's rows.
func (a materializeArgs) seed() bool { return a.SeedFromParent == nil || *a.SeedFromParent }

var targetRE = regexp.MustCompile(`^ducklake://([a-z][a-z0-9_]{0,62})/([a-z][a-z0-9_]{0,62})$`)

// queryStart is how the last statement of a materialize query must begin.
var queryStart = regexp.MustCompile(`(?i)^\s*(\(|select\b|with\b|from\b|values\b|table\b|pivot\b|unpivot\b)`)

// Materialized is the result of a materialize request (and what is recorded).
type Materialized struct {
	Workspace      string            `json:"workspace"`
	Target         string            `json:"target"`
	Strategy       string            `json:"strategy"`
	Status         string            `json:"status"`
	SnapshotID     *int64            `json:"snapshot_id"`
	RowCount       int64             `json:"row_count"`
	TotalRows      int64             `json:"total_rows"`
	Columns        []protocol.Column `json:"columns"`
	MetadataSchema string            `json:"metadata_schema"`
	Forked         bool              `json:"forked"`
	// SeededFrom and SeededRows: an append onto a deferred table started the fork's table from
	// the rows of this ancestor.
	SeededFrom string `json:"seeded_from,omitempty"`
	SeededRows int64  `json:"seeded_rows,omitempty"`
	// PromotedFrom is the fork whose version of the table dataenv.promote wrote (promote only).
	PromotedFrom string   `json:"promoted_from,omitempty"`
	Notes        []string `json:"notes,omitempty"`
	// Phases is where the runner's time went (sql: the query, its write and dataenv's summary).
	Phases map[string]string `json:"phases,omitempty"`
}

func (h *Handlers) handleMaterialize(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	var args materializeArgs
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Strategy == "" {
		args.Strategy = StrategyReplace
	}
	m := targetRE.FindStringSubmatch(args.Target)
	if m == nil || args.Workspace == "" {
		return nil, request.Refusef("materialize: workspace and target ducklake://<lake>/<table> are required (got %q)", args.Target)
	}
	if args.Strategy != StrategyReplace && args.Strategy != StrategyAppend {
		return nil, request.Refusef("materialize: strategy must be replace or append (got %q)", args.Strategy)
	}
	if done, err := h.recorded(ctx, req); done != nil || err != nil {
		return done, err
	}
	stmts := lake.SplitStatements(args.Query)
	if len(stmts) == 0 || !queryStart.MatchString(stripLeadingComments(stmts[len(stmts)-1])) {
		return nil, request.Refusef("materialize: the last statement of query must be the query to write (SELECT, WITH, FROM, VALUES...)")
	}
	lim, err := h.limits(ctx, args.Workspace, args.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	target := &lake.Target{Lake: m[1], Table: m[2]}
	plan, err := h.cfg.Resolver.Resolve(ctx, args.Workspace, strings.Join(stmts[:len(stmts)-1], ";\n"), target, rep)
	if err != nil {
		return nil, err
	}
	defer plan.Close()
	request.ReportHeld(ctx, rep, "resolve", "done", strings.Join(plan.Notes, "; "))
	out, err := h.write(ctx, req, rep, plan, lim, args, stmts[len(stmts)-1])
	if err != nil {
		return nil, err
	}
	out.Notes = append(out.Notes, h.refreshDescendants(ctx, args.Workspace, target.Lake, rep)...)
	return scrubbed(plan, out)
}

// write runs the materialization and records it.
func (h *Handlers) write(ctx context.Context, req *request.Request, rep request.Reporter, plan *lake.Plan, lim *jobLimits, args materializeArgs, query string) (*Materialized, error) {
	table := lake.Ident(plan.TargetAlias) + "." + lake.Ident(tableName(args.Target))
	out := &Materialized{Workspace: args.Workspace, Target: args.Target, Strategy: args.Strategy, Status: "materialized",
		MetadataSchema: plan.Target.SchemaName(), Forked: plan.Target.Forked, Notes: plan.Notes, Columns: []protocol.Column{},
		PromotedFrom: args.promotedFrom}
	seed := args.Strategy == StrategyAppend && plan.TargetDefersTo != "" && args.seed()
	if args.Strategy == StrategyAppend && plan.TargetDefersTo != "" && !seed {
		out.Notes = append(out.Notes, fmt.Sprintf("seed_from_parent => false: the fork's table starts empty; it no longer reads the rows of %s", plan.TargetDefersTo))
	}
	write, commit := writeSQL(table, query, args.Strategy, plan.TargetDrops, seed), commitSQL(plan.TargetAlias, args.Target, req)
	snap, done, err := h.committed(ctx, plan, req, req.Attempts > 1)
	if err != nil {
		return nil, request.Retryable(err)
	}
	if done {
		// A previous attempt committed the write (its snapshot carries this request's id) and
		// died before recording it: record it without writing again.
		write = fmt.Sprintf("SELECT count(*) FROM system.main.ducklake_table_insertions(%s, 'main', %s, %d, %d)",
			lake.Literal(plan.TargetAlias), lake.Literal(tableName(args.Target)), snap, snap)
		commit = "SELECT 0"
		out.Notes = append(out.Notes, "the write was committed by an earlier attempt of this request; not repeated")
	}
	// The job's own SQL ran before on this connection and may have made macros named like any
	// function (max, ducklake_snapshots): what is recorded reads DuckDB's own, by their full names.
	summary := fmt.Sprintf(`SELECT (SELECT system.main.max(snapshot_id) FROM system.main.ducklake_snapshots(%s)) AS snapshot_id,
       (SELECT count(*) FROM %s) AS total_rows`, lake.Literal(plan.TargetAlias), table)
	res, err := h.runJob(ctx, plan, lim, []string{plan.SQL, write, commit, summary, "DESCRIBE " + table}, false, args.MaxResultBytes)
	if err == nil {
		err = crashpoint.FailOnce("job.materialize.fail_after_commit") // tests: a job that fails after its commit
	}
	if err != nil {
		if request.IsTransient(err) || ctx.Err() != nil {
			// Not recorded: the next attempt writes (or finds the write committed) and records it.
			return nil, err
		}
		if _, wrote, cerr := h.committed(ctx, plan, req, true); cerr != nil || wrote {
			// The job failed after its write committed (a later block, or the COMMIT's answer
			// lost): the write must not be recorded as failed. The next attempt finds it
			// committed and records it without writing again.
			return nil, request.Retryable(fmt.Errorf("materialize: the job failed after its write may have committed (%v); checking again", err))
		}
		if args.promotedFrom != "" {
			// A failed promote left the parent's table as it was: a failed record would hide
			// that table from the parent's forks (their defers follow the latest record).
			return nil, err
		}
		out.Status = "failed"
		if rerr := h.record(ctx, req, out, err.Error()); rerr != nil {
			return nil, request.Retryable(rerr)
		}
		return nil, err
	}
	if err := summarize(res.Results, out); err != nil {
		return nil, err
	}
	out.Phases = resultPhases(res.Phases)
	if seed && !done {
		out.SeededFrom, out.SeededRows = plan.TargetDefersTo, out.TotalRows-out.RowCount
	}
	crashpoint.HitOnce("job.materialize.after_write")
	if err := h.record(ctx, req, out, ""); err != nil {
		return nil, request.Retryable(err)
	}
	request.ReportHeld(ctx, rep, "record", "done", fmt.Sprintf("%d rows, snapshot %v", out.RowCount, deref(out.SnapshotID)))
	return out, nil
}

// writeSQL is the write block: a transaction on the lake that the commit block (commitSQL)
// finishes. When the target is a defer view in a fork, the rows are staged in a temporary table
// first (the query may read the view it replaces), then, inside the transaction, the view is
// dropped and the table written from the staged rows. An append with seed stages the view's rows
// (the ancestor's) too and starts the table from them. The block's last statement returns the
// number of rows written.
func writeSQL(table, query, strategy string, drops []string, seed bool) string {
	var pre []string
	seedTable := ""
	if len(drops) > 0 {
		if seed {
			pre = append(pre, "CREATE OR REPLACE TEMP TABLE __dataenv_seed AS SELECT * FROM "+table)
			seedTable = "__dataenv_seed"
		}
		pre = append(pre, "CREATE OR REPLACE TEMP TABLE __dataenv_rows AS "+query)
		query = "SELECT * FROM __dataenv_rows"
	}
	pre = append(append(pre, "BEGIN TRANSACTION"), drops...)
	var write string
	switch {
	case strategy == StrategyReplace:
		write = fmt.Sprintf("CREATE OR REPLACE TABLE %s AS %s", table, query)
	case seedTable != "":
		write = fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s;\nINSERT INTO %s SELECT * FROM (%s) AS q", table, seedTable, table, query)
	default:
		write = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s AS SELECT * FROM (%s) AS q LIMIT 0;\nINSERT INTO %s SELECT * FROM (%s) AS q",
			table, query, table, query)
	}
	return strings.Join(append(pre, write), ";\n")
}

// commitSQL tags the write's snapshot with the request id (DuckLake's commit extra info) and
// commits it, so that a rerun after a crash can tell that the write already happened.
func commitSQL(alias, target string, req *request.Request) string {
	return fmt.Sprintf("CALL %s.set_commit_message('dataenv', %s, extra_info => %s);\nCOMMIT",
		lake.Ident(alias), lake.Literal("materialize "+target), lake.Literal(commitTag(req)))
}

func commitTag(req *request.Request) string { return `{"dataenv_request":"` + req.ID.String() + `"}` }

// committed returns the snapshot of the target namespace tagged with this request, if any; it
// looks only when look is set (the first attempt has nothing to find before it writes).
func (h *Handlers) committed(ctx context.Context, plan *lake.Plan, req *request.Request, look bool) (int64, bool, error) {
	if !look {
		return 0, false, nil
	}
	ns := plan.Target
	// The namespace's tables belong to the workspace's role: read them as it, never as an admin.
	conn, err := h.cfg.Resolver.Clusters.ConnectWorkspace(ctx, ns.Lake.CatalogCluster, ns.Workspace, ns.Lake.CatalogDatabase)
	if err != nil {
		return 0, false, err
	}
	defer conn.Close(context.Background())
	var found bool
	schema := pgx.Identifier{ns.SchemaName()}.Sanitize()
	err = conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass(pg_catalog.format('%I.ducklake_snapshot_changes', $1::text)) IS NOT NULL`,
		ns.SchemaName()).Scan(&found)
	if err != nil || !found {
		return 0, false, err
	}
	var snap int64
	err = conn.QueryRow(ctx, `SELECT snapshot_id FROM `+schema+`.ducklake_snapshot_changes WHERE commit_extra_info = $1 ORDER BY snapshot_id DESC LIMIT 1`,
		commitTag(req)).Scan(&snap)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return snap, err == nil, err
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func tableName(target string) string { return targetRE.FindStringSubmatch(target)[2] }

// summarize reads the row count of the write block, the snapshot and total of the summary block
// and the columns of the DESCRIBE block (blocks: the query's other statements, write, commit,
// summary, describe; the attaches run as the job's setup).
func summarize(results []protocol.Result, out *Materialized) error {
	if len(results) < 5 {
		return fmt.Errorf("materialize: the runner returned %d results, want 5", len(results))
	}
	if w := results[1]; len(w.Rows) > 0 && len(w.Rows[0]) > 0 {
		_ = json.Unmarshal(w.Rows[0][0], &out.RowCount)
	}
	if s := results[3]; len(s.Rows) > 0 && len(s.Rows[0]) == 2 {
		_ = json.Unmarshal(s.Rows[0][0], &out.SnapshotID)
		_ = json.Unmarshal(s.Rows[0][1], &out.TotalRows)
	}
	for _, row := range results[4].Rows {
		var c protocol.Column
		if len(row) >= 2 && json.Unmarshal(row[0], &c.Name) == nil && json.Unmarshal(row[1], &c.Type) == nil {
			out.Columns = append(out.Columns, c)
		}
	}
	return nil
}

const recordSQL = `
INSERT INTO dataenv.materializations (workspace, lake, table_name, status, strategy, snapshot_id, row_count, columns,
                                      metadata_schema, request_id, error, promoted_from)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, nullif($11, ''), nullif($12, ''))
ON CONFLICT (request_id) DO NOTHING`

func (h *Handlers) record(ctx context.Context, req *request.Request, m *Materialized, errText string) error {
	p := targetRE.FindStringSubmatch(m.Target)
	cols, _ := json.Marshal(m.Columns)
	_, err := h.cfg.Control.Exec(ctx, recordSQL, m.Workspace, p[1], p[2], m.Status, m.Strategy, m.SnapshotID, m.RowCount,
		cols, m.MetadataSchema, req.ID, errText, m.PromotedFrom)
	if err != nil {
		return fmt.Errorf("record the materialization of %s: %w", m.Target, err)
	}
	return nil
}

// recorded returns the outcome of a materialization this request already recorded (a rerun
// after a crash between the record and the request's outcome).
func (h *Handlers) recorded(ctx context.Context, req *request.Request) (any, error) {
	var m Materialized
	var lakeName, table, errText string
	var cols []byte
	err := h.cfg.Control.QueryRow(ctx, `
		SELECT workspace, lake, table_name, status, strategy, snapshot_id, coalesce(row_count, 0), columns,
		       coalesce(metadata_schema, ''), coalesce(error, ''), coalesce(promoted_from, '')
		  FROM dataenv.materializations WHERE request_id = $1`, req.ID).
		Scan(&m.Workspace, &lakeName, &table, &m.Status, &m.Strategy, &m.SnapshotID, &m.RowCount, &cols, &m.MetadataSchema, &errText, &m.PromotedFrom)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, request.Retryable(err)
	}
	if m.Status == "failed" {
		return nil, request.Refusef("%s", errText)
	}
	m.Target = "ducklake://" + lakeName + "/" + table
	_ = json.Unmarshal(cols, &m.Columns)
	return &m, nil
}

func stripLeadingComments(s string) string {
	for {
		s = strings.TrimSpace(s)
		switch {
		case strings.HasPrefix(s, "--"):
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				s = s[i+1:]
				continue
			}
			return ""
		case strings.HasPrefix(s, "/*"):
			if i := strings.Index(s, "*/"); i >= 0 {
				s = s[i+2:]
				continue
			}
			return ""
		}
		return s
	}
}
