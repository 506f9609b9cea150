package engine

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

var extensionName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Install runs INSTALL (FORCE INSTALL when force) for each extension into dir, DuckDB's own way:
// from its extension repository. It needs that repository to answer; where it does not,
// runner/scripts/install-extensions.sh unpacks the same signed binaries from PyPI instead.
func Install(ctx context.Context, dir string, force bool, names ...string) error {
	in, err := Open(ctx, dir)
	if err != nil {
		return err
	}
	defer in.Close()
	for _, n := range names {
		if !extensionName.MatchString(n) {
			return fmt.Errorf("extension name %q: only letters, digits and _ are allowed", n)
		}
		stmt := "INSTALL " + strings.ToLower(n)
		if force {
			stmt = "FORCE " + stmt
		}
		if _, err := in.Conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}
