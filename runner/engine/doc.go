// Package engine runs a protocol.Request in an in-process DuckDB (duckdb-go, cgo). It is what
// the dataenv-runner binary executes, and what benchmarks use as the in-process baseline.
// Only packages under runner/ may import it: the sidecar stays cgo-free.
package engine
