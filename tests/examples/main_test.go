// Package examples_test runs what the documentation shows, as a reader would: the quickstart
// (examples/quickstart.sql) with the real psql against a real `dataenv dev`, and every SQL block
// of README.md and docs/*.md against a fresh `dataenv dev` per file. A broken example fails here.
//
// The convention for SQL blocks in the Markdown files (see blocks_test.go):
//
//	```sql                 runs, in order with the file's other blocks, in one psql session; every
//	                       statement must succeed and every request it makes must succeed
//	```sql fails: <why>    runs; a statement or a request of it must fail (the block shows an error)
//	```sql norun: <why>    not run; the reason says why (an external host, a placeholder...)
//
// Anything else after "sql" is an error, so a typo cannot silently skip a block.
package examples_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		runnerPath, err := testenv.BuildRunner(ctx)
		if err != nil {
			return err
		}
		os.Setenv(client.EnvRunnerPath, runnerPath)
		_, err = sidecartest.Binary()
		return err
	})
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}
