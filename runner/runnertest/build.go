// Package runnertest builds the dataenv-runner binary for tests and benchmarks of the packages
// that spawn it.
package runnertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/dataenv/dataenv/runner/client"
)

// Build compiles dataenv-runner into a new temporary directory and returns the binary's path and
// a function that removes the directory. It uses the go command on PATH and the module the
// caller is built from, so test runs share Go's build cache.
func Build(ctx context.Context) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "dataenv-runner-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, client.RunnerName)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/dataenv/dataenv/runner/cmd/dataenv-runner")
	if out, err := cmd.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build dataenv-runner: %w\n%s", err, out)
	}
	return path, remove, nil
}
