package testenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// VenvBin is the path of program (python, dbt) in the repository's Python virtual environment
// (.venv, made by `make deps` from tests/setup/requirements.txt: duckdb, dbt-duckdb).
func VenvBin(program string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, ".venv", "bin", program)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("testenv: %s is missing: run `make deps` (tests/setup/deps.sh installs tests/setup/requirements.txt into .venv)", p)
	}
	return p, nil
}
