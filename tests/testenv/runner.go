package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/dataenv/dataenv/runner/client"
)

// BuildRunner compiles dataenv-runner for the package's tests and returns the binary's path;
// the build is removed when Main finishes.
func BuildRunner(ctx context.Context) (string, error) {
	path, remove, err := BuildRunnerBinary(ctx)
	if err != nil {
		return "", err
	}
	RegisterCleanup("dataenv-runner build", func(context.Context) error { remove(); return nil })
	return path, nil
}

// BuildRunnerBinary compiles dataenv-runner into a new temporary directory and returns the
// binary's path and a function that removes the directory. It uses the go command on PATH and the
// module the caller is built from, so test runs and benchmarks share Go's build cache.
func BuildRunnerBinary(ctx context.Context) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "dataenv-runner-bin-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, client.RunnerName)
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "dataenv_testhooks", "-o", path, "github.com/dataenv/dataenv/runner/cmd/dataenv-runner")
	if out, err := cmd.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build dataenv-runner: %w\n%s", err, out)
	}
	return path, remove, nil
}
