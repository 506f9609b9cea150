package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/dataenv/dataenv/runner/protocol"
)

// BlockHook is called after each block with the number of blocks run so far; the runner uses
// it for test hooks. May be nil.
type BlockHook func(done int)

// Run executes req's blocks on a fresh DuckDB instance and returns the response.
func Run(ctx context.Context, req *protocol.Request, hook BlockHook) *protocol.Response {
	in, err := Open(ctx, req.ExtensionDirectory)
	if err != nil {
		return &protocol.Response{Results: []protocol.Result{}, Error: err.Error(), ErrorBlock: -1}
	}
	defer in.Close()
	return RunOn(ctx, in, req, hook)
}

// RunOn executes req's blocks on an open instance (a warm one, possibly). A failing block ends
// the job: the response carries the error and the results collected before it.
func RunOn(ctx context.Context, in *Instance, req *protocol.Request, hook BlockHook) *protocol.Response {
	resp := &protocol.Response{Results: []protocol.Result{}}
	conn := in.Conn
	ph := &resp.Phases
	mark := time.Now()
	lap := func(d *time.Duration) {
		now := time.Now()
		*d, mark = now.Sub(mark), now
	}
	var err error
	if req.Sandbox == nil {
		err = in.unpreset(ctx) // a job without a sandbox runs as on a fresh instance
	}
	if err == nil {
		err = in.Apply(ctx, Settings{MemoryLimit: req.MemoryLimit, Threads: req.Threads, TempDirectory: req.TempDirectory,
			MaxTempDirectorySize: req.MaxTempDirectorySize})
	}
	if err == nil {
		err = setArgs(ctx, conn, req.Args)
	}
	lap(&ph.Settings)
	if err == nil {
		err = runSetup(ctx, conn, req.Setup)
		lap(&ph.Setup)
	}
	limit := req.MaxResultBytes
	if limit <= 0 {
		limit = protocol.DefaultMaxResultBytes
	}
	if err == nil {
		resp.Probes, err = runProbes(ctx, conn, req.Probes, protocol.MaxProbeBytes)
		lap(&ph.Probes)
	}
	if err == nil && req.Sandbox != nil {
		err = applySandbox(ctx, in, req.Sandbox)
		lap(&ph.Sandbox)
	}

	if err != nil {
		resp.Error, resp.ErrorBlock = err.Error(), -1
		return resp
	}
	defer lap(&ph.Blocks)
	c := newCollector(limit)
	for i, block := range req.Blocks {
		res, err := c.query(ctx, conn, i, block)
		if err != nil {
			resp.Error, resp.ErrorBlock = err.Error(), i
			return resp
		}
		if !req.CollectLastOnly || i == len(req.Blocks)-1 {
			resp.Results = append(resp.Results, *res)
		} else {
			c.forget(res)
		}
		if hook != nil {
			hook(i + 1)
		}
	}
	return resp
}

var argName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// setArgs makes each job argument a DuckDB variable, typed from its JSON value:
// getvariable('name') reads it in any block.
func setArgs(ctx context.Context, conn *sql.Conn, args map[string]json.RawMessage) error {
	for name, raw := range args {
		if !argName.MatchString(name) {
			return fmt.Errorf("job argument %q: names are letters, digits and _, not starting with a digit", name)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("job argument %q: %w", name, err)
		}
		expr := "json_extract(?::JSON, '$')"
		switch x := v.(type) {
		case string:
			expr, v = "?::VARCHAR", x
		case bool:
			expr, v = "?::BOOLEAN", x
		case float64:
			expr, v = "?::DOUBLE", x
			if x == float64(int64(x)) {
				expr, v = "?::BIGINT", int64(x)
			}
		case nil:
			expr = "NULL"
		default:
			v = string(raw)
		}
		params := []any{v}
		if expr == "NULL" {
			params = nil
		}
		if _, err := conn.ExecContext(ctx, "SET VARIABLE "+name+" = "+expr, params...); err != nil {
			return fmt.Errorf("job argument %q: %w", name, err)
		}
	}
	return nil
}
