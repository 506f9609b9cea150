// Package extension says where dataenv keeps the DuckDB extensions the runner loads, and which
// ones it needs. It is cgo-free, so the sidecar and the runner client can use it.
//
// The convention: DATAENV_DUCKDB_EXTENSION_DIR is DuckDB's own `extension_directory` setting,
// default $HOME/.duckdb/extensions (DuckDB's default, so a plain DuckDB finds the same files).
// Binaries live at <dir>/<DuckDB version>/<platform>/<name>.duckdb_extension, exactly where
// DuckDB's INSTALL puts them. runner/scripts/install-extensions.sh fills it.
package extension

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// EnvDir names the environment variable that overrides the extension directory.
const EnvDir = "DATAENV_DUCKDB_EXTENSION_DIR"

// DuckDBVersion is the DuckDB release the runner links (duckdb-go v2.10505.0).
const DuckDBVersion = "v1.5.5"

// Required lists the extensions every dataenv job may load without installing them.
var Required = []string{"ducklake", "postgres_scanner", "httpfs"}

// Dir returns the extension directory: $DATAENV_DUCKDB_EXTENSION_DIR, else
// $HOME/.duckdb/extensions.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("extension directory: set %s or HOME: %w", EnvDir, err)
	}
	return filepath.Join(home, ".duckdb", "extensions"), nil
}

// Platform is DuckDB's name for this machine's platform, e.g. linux_amd64.
func Platform() string {
	return runtime.GOOS + "_" + runtime.GOARCH
}

// Path is where DuckDB looks for extension name under dir.
func Path(dir, name string) string {
	return filepath.Join(dir, DuckDBVersion, Platform(), name+".duckdb_extension")
}

// Missing returns the names whose binary is not in dir.
func Missing(dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Stat(Path(dir, n)); errors.Is(err, os.ErrNotExist) || err != nil {
			out = append(out, n)
		}
	}
	return out
}

// Check returns an actionable error when a required extension is not installed in dir.
func Check(dir string) error {
	if m := Missing(dir, Required...); len(m) > 0 {
		return fmt.Errorf("DuckDB extensions %v are not installed in %s: run `make deps` "+
			"(runner/scripts/install-extensions.sh) or point %s at a directory that has them",
			m, filepath.Join(dir, DuckDBVersion, Platform()), EnvDir)
	}
	return nil
}
