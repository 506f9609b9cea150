// Package lakecompare holds only a test: the rows of dataenv.run and dataenv.materialize jobs
// (SQL → sidecar → dataenv-runner, ducklake:// resolved by the sidecar) are the rows DuckDB
// returns in-process for the same SQL on the same DuckLake catalog and data path. It lives under
// runner/ because only runner code may link DuckDB.
package lakecompare
