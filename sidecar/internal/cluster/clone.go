package cluster

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/sidecar/internal/reflink"
)

// cloneCheckSQL: whether this server offers file_copy_method = clone, and its data directory
// (NULL when the admin may not read it: superusers and pg_read_all_settings members may).
const cloneCheckSQL = `
SELECT coalesce((SELECT 'clone' = ANY (enumvals) FROM pg_catalog.pg_settings WHERE name = 'file_copy_method'), false),
       (SELECT setting FROM pg_catalog.pg_settings WHERE name = 'data_directory')`

// ServerVersion is the cluster's server_version ("18.1 (Debian 18.1-1)"), as the server
// reported it when conn connected.
func ServerVersion(conn *pgx.Conn) string { return conn.PgConn().ParameterStatus("server_version") }

// CanClone reports whether CREATE DATABASE ... STRATEGY FILE_COPY with file_copy_method = clone
// makes a reflink copy on this cluster, checked rather than assumed: the server is PostgreSQL
// 18 or newer and offers clone, the admin may read data_directory, and that directory, as this
// machine sees it, is on a file system that clones (sidecar/internal/reflink). Linux PostgreSQL
// clones with copy_file_range, which a file system without reflink silently turns into a full
// copy (slower than the default WAL_LOG strategy), hence the file system check. reason says
// what is missing when ok is false; err is a failure to ask.
func (l *Locked) CanClone(ctx context.Context, conn *pgx.Conn) (ok bool, reason string, err error) {
	version := ServerVersion(conn)
	if major, err := pgtool.Major(version); err != nil || major < 18 {
		return false, fmt.Sprintf("PostgreSQL %s has no file_copy_method (18 and newer have)", version), nil
	}
	var offered bool
	var dataDir *string
	if err := conn.QueryRow(ctx, cloneCheckSQL).Scan(&offered, &dataDir); err != nil {
		return false, "", retryable(fmt.Errorf("cluster %q: read file_copy_method and data_directory: %w", l.cluster.Name, err))
	}
	switch {
	case !offered:
		return false, "this server build offers no file_copy_method = clone", nil
	case dataDir == nil:
		user := conn.Config().User
		return false, fmt.Sprintf("the admin %q may not read data_directory, so its file system cannot be checked "+
			"(GRANT pg_read_all_settings TO %s)", user, ident(user)), nil
	}
	if err := reflink.Check(*dataDir); err != nil {
		return false, "data directory " + err.Error(), nil
	}
	return true, "", nil
}
