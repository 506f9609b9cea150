package engine

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	"github.com/duckdb/duckdb-go/v2"
)

// Options configure a DuckDB instance.
type Options struct {
	// Path is the database file; empty means an in-memory database.
	Path string
	// ExtensionDirectory is DuckDB's extension_directory (see runner/extension).
	ExtensionDirectory string
	MemoryLimit        string
	Threads            int
	TempDirectory      string
}

// Open starts a DuckDB instance and returns its single connection. Every block of a job runs on
// this connection, so SET, ATTACH and CREATE SECRET carry from one block to the next. Closing
// the connection and the DB releases the instance.
func Open(ctx context.Context, o Options) (*sql.DB, *sql.Conn, error) {
	q := url.Values{}
	if o.ExtensionDirectory != "" {
		q.Set("extension_directory", o.ExtensionDirectory)
	}
	if o.MemoryLimit != "" {
		q.Set("memory_limit", o.MemoryLimit)
	}
	if o.Threads > 0 {
		q.Set("threads", fmt.Sprint(o.Threads))
	}
	if o.TempDirectory != "" {
		q.Set("temp_directory", o.TempDirectory)
	}
	dsn := o.Path
	if len(q) > 0 {
		dsn += "?" + q.Encode()
	}
	connector, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("open DuckDB: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("connect to DuckDB: %w", err)
	}
	return db, conn, nil
}
