// Package crashpoint lets tests kill the sidecar with SIGKILL at a named point, to prove that
// every request finishes exactly once after a restart. Points exist only in binaries built with
// the dataenv_testhooks tag (tests/sidecartest builds them), armed with
// DATAENV_CRASH_AT=<point>[,<point>...]; in the shipped binary every function here is an empty
// inline call. FailOnce is the same for a step that must fail (with a final error) instead of
// dying.
package crashpoint
