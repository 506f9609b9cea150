package engine

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dataenv/dataenv/runner/protocol"
)

// sandboxConfigs are the settings a sandboxed job may still change: presentation only.
var sandboxConfigs = []string{"TimeZone"}

// runSetup runs the request's setup statements (their rows are not kept).
func runSetup(ctx context.Context, conn *sql.Conn, setup []string) error {
	for i, st := range setup {
		if _, err := conn.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("setup statement %d: %w", i+1, err)
		}
	}
	return nil
}

// runProbes runs the request's probes (after Setup, before the sandbox and the job's SQL) and
// collects their rows, within limit bytes of JSON together. A probe that fails gets its error in
// its result; only a cancelled job stops them.
func runProbes(ctx context.Context, conn *sql.Conn, probes []string, limit int64) ([]protocol.Result, error) {
	if len(probes) == 0 {
		return nil, nil
	}
	c := newCollector(limit)
	out := make([]protocol.Result, 0, len(probes))
	for i, p := range probes {
		res, err := c.query(ctx, conn, i, p)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			res = &protocol.Result{Block: i, Error: err.Error()}
		}
		out = append(out, *res)
	}
	return out, nil
}

// applySandbox closes DuckDB's door on the job's own SQL; see protocol.Sandbox. The order
// matters: the allowed lists are normalized by the file systems registered when they are set
// (httpfs must be loaded for an s3:// prefix to stay one), and lock_configuration comes last. All
// of it is one call where httpfs is known loaded (each call of its own costs a job about a fifth
// of a millisecond, and listing the extensions a millisecond). What a spare set ahead
// (PresetSandbox) is not set again.
func applySandbox(ctx context.Context, in *Instance, sb *protocol.Sandbox) error {
	stmts := in.unlessPreset([]string{
		"SET autoinstall_known_extensions = false",
		"SET allow_community_extensions = false",
	})
	remote := false
	for _, d := range sb.AllowedDirectories {
		remote = remote || strings.Contains(d, "://")
	}
	if remote && !in.loaded["httpfs"] {
		stmts = append(stmts, "LOAD httpfs")
	}
	if !in.loaded["httpfs"] {
		if _, err := in.Conn.ExecContext(ctx, strings.Join(stmts, ";\n")); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		stmts = nil
		// A setup statement may have loaded it.
		var httpfs bool
		if err := in.Conn.QueryRowContext(ctx,
			"SELECT count(*) > 0 FROM duckdb_extensions() WHERE extension_name = 'httpfs' AND loaded").Scan(&httpfs); err != nil {
			return fmt.Errorf("sandbox: is httpfs loaded: %w", err)
		}
		in.loaded["httpfs"] = httpfs
	}
	if in.loaded["httpfs"] {
		stmts = append(stmts, in.unlessPreset([]string{"SET s3_url_compatibility_mode = true"})...)
	}
	stmts = append(stmts, "SET allowed_directories = "+list(sb.AllowedDirectories))
	if len(sb.AllowedPaths) > 0 { // (empty is DuckDB's default)
		stmts = append(stmts, "SET allowed_paths = "+list(sb.AllowedPaths))
	}
	stmts = append(stmts, "SET enable_external_access = false")
	stmts = append(stmts, in.unlessPreset([]string{"SET allowed_configs = " + list(sandboxConfigs)})...)
	stmts = append(stmts, "SET lock_configuration = true")
	if _, err := in.Conn.ExecContext(ctx, strings.Join(stmts, ";\n")); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	in.preset = nil // part of the locked sandbox now
	return nil
}

// unlessPreset is stmts (SET name = ...) but those PresetSandbox made already.
func (in *Instance) unlessPreset(stmts []string) []string {
	out := stmts[:0:0]
	for _, st := range stmts {
		name, _, _ := strings.Cut(strings.TrimPrefix(st, "SET "), " ")
		if !in.preset[name] {
			out = append(out, st)
		}
	}
	return out
}

// list renders ss as a DuckDB list of string literals.
func list(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = quote(s)
	}
	return "[" + strings.Join(parts, ", ") + "]::VARCHAR[]"
}
