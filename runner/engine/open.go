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
	in := &Instance{db: db, Conn: conn}
	for _, name := range preload {
		if !extensionName.MatchString(name) {
			in.Close()
			return nil, fmt.Errorf("extension name %q: only letters, digits and _ are allowed", name)
		}
		if _, err := conn.ExecContext(ctx, "LOAD "+name); err != nil {
			in.Close()
			return nil, fmt.Errorf("LOAD %s: %w", name, err)
		}
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

// Apply sets s on the instance.
func (in *Instance) Apply(ctx context.Context, s Settings) error {
	var stmts []string
	if s.MemoryLimit != "" {
		stmts = append(stmts, "SET memory_limit = "+quote(s.MemoryLimit))
	}
	if s.Threads > 0 {
		stmts = append(stmts, fmt.Sprintf("SET threads = %d", s.Threads))
	}
	if s.TempDirectory != "" {
		stmts = append(stmts, "SET temp_directory = "+quote(s.TempDirectory))
	}
	if s.MaxTempDirectorySize != "" {
		stmts = append(stmts, "SET max_temp_directory_size = "+quote(s.MaxTempDirectorySize))
	}
	for _, st := range stmts {
		if _, err := in.Conn.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
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
