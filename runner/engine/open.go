package engine

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// Instance is an open in-memory DuckDB with the single connection every block of a job runs on,
// so SET, ATTACH and CREATE SECRET carry from one block to the next.
type Instance struct {
	db   *sql.DB
	Conn *sql.Conn
	// applied are the settings Apply set last: a setting a job asks for again is not set again
	// (a spare applies its expected job's settings before that job arrives).
	applied Settings
	// loaded are the extensions loaded by Open (preload) or by the sandbox.
	loaded map[string]bool
	// preset are the sandbox settings PresetSandbox made, by name.
	preset map[string]bool
}

// Open starts an in-memory DuckDB whose extension_directory is extDir (see runner/extension)
// and loads the preload extensions. A spare runner does this before its job arrives.
func Open(ctx context.Context, extDir string, preload ...string) (*Instance, error) {
	dsn := ""
	if extDir != "" {
		dsn = "?" + url.Values{"extension_directory": {extDir}}.Encode()
	}
	connector, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, fmt.Errorf("open DuckDB: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to DuckDB: %w", err)
	}
	in := &Instance{db: db, Conn: conn, loaded: map[string]bool{}}
	for _, name := range preload {
		if !extensionName.MatchString(name) {
			in.Close()
			return nil, fmt.Errorf("extension name %q: only letters, digits and _ are allowed", name)
		}
		if _, err := conn.ExecContext(ctx, "LOAD "+name); err != nil {
			in.Close()
			return nil, fmt.Errorf("LOAD %s: %w", name, err)
		}
		in.loaded[name] = true
	}
	return in, nil
}

// Settings are the per-job DuckDB settings; empty fields keep DuckDB's defaults.
type Settings struct {
	MemoryLimit          string
	Threads              int
	TempDirectory        string
	MaxTempDirectorySize string
}

// Apply sets s on the instance, in one call, leaving alone what is set to the same value already
// (setting memory_limit alone costs DuckDB about a millisecond).
func (in *Instance) Apply(ctx context.Context, s Settings) error {
	var stmts []string
	next := in.applied
	if s.MemoryLimit != "" && s.MemoryLimit != next.MemoryLimit {
		stmts, next.MemoryLimit = append(stmts, "SET memory_limit = "+quote(s.MemoryLimit)), s.MemoryLimit
	}
	if s.Threads > 0 && s.Threads != next.Threads {
		stmts, next.Threads = append(stmts, fmt.Sprintf("SET threads = %d", s.Threads)), s.Threads
	}
	if s.TempDirectory != "" && s.TempDirectory != next.TempDirectory {
		stmts, next.TempDirectory = append(stmts, "SET temp_directory = "+quote(s.TempDirectory)), s.TempDirectory
	}
	if s.MaxTempDirectorySize != "" && s.MaxTempDirectorySize != next.MaxTempDirectorySize {
		stmts, next.MaxTempDirectorySize = append(stmts, "SET max_temp_directory_size = "+quote(s.MaxTempDirectorySize)), s.MaxTempDirectorySize
	}
	if len(stmts) == 0 {
		return nil
	}
	// DuckDB runs them in order and stops at the first that fails: what is applied is then
	// unknown, and nothing is taken as set.
	if _, err := in.Conn.ExecContext(ctx, strings.Join(stmts, ";\n")); err != nil {
		in.applied = Settings{}
		return fmt.Errorf("%s: %w", strings.Join(stmts, "; "), err)
	}
	in.applied = next
	return nil
}

// Close releases the connection and the database.
func (in *Instance) Close() error {
	in.Conn.Close()
	return in.db.Close()
}

// quote renders s as a SQL string literal.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
