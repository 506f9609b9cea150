// Package compare performs compare_fork requests: what a fork changed against its parent. For
// each datatable copy (schema_only, full_copy) it reads a catalog snapshot of the copy and of the
// parent's database, as the cluster's admin and reading pg_catalog only (no function of the
// compared databases runs), and diffs them (Diff, pure); for each lake it reports the tables the
// fork materialized, from the control database's records, beside the parent's state.
package compare
