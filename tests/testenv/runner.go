package testenv

import (
	"context"

	"github.com/dataenv/dataenv/runner/runnertest"
)

// BuildRunner compiles dataenv-runner for the package's tests and returns the binary's path;
// the build is removed when Main finishes.
func BuildRunner(ctx context.Context) (string, error) {
	path, remove, err := runnertest.Build(ctx)
	if err != nil {
		return "", err
	}
	RegisterCleanup("dataenv-runner build", func(context.Context) error { remove(); return nil })
	return path, nil
}
