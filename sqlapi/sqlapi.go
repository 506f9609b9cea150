// Package sqlapi holds dataenv's user-facing SQL API: functions, views, triggers, grants and
// row-level security policies. Every file is idempotent (CREATE OR REPLACE, guarded DDL) and the
// whole bundle is re-applied, in file-name order and in one transaction, on every install.
// Number ranges per area: 000-009 roles and requests, 010-019 clusters, 020-029 workspaces and
// forks, 030-039 jobs, 040-049 lakes and storage, 050-059 satellites (the satellite side in
// satellite/, SatelliteFS), 060-069 lifecycle, 900-999 publication and final grants. What both
// installations have alike is in shared/ (SharedFS), applied first by both, numbered in the same
// ranges without reusing a number of either.
package sqlapi

import "embed"

// FS holds the *.sql files.
//
//go:embed *.sql
var FS embed.FS
