// Package migrations holds dataenv's numbered, forward-only table migrations. Each file
// NNN_name.up.sql is applied once, in its own transaction, together with its row in
// dataenv.schema_migrations. Functions, views, grants and policies live in sqlapi/ instead and are
// re-created on every install.
//
// Number ranges per area keep parallel work from colliding:
// 001-009 requests and installation, 010-019 clusters, 020-029 workspaces and forks,
// 030-039 jobs and materializations, 040-049 lakes and storage, 050-059 satellites (the
// satellite side in satellite/, SatelliteFS), 060-069 lifecycle.
package migrations

import "embed"

// FS holds the *.up.sql files.
//
//go:embed *.up.sql
var FS embed.FS
