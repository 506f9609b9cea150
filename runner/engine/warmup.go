package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// warmUpAlias is the lake the warm-up attaches; no job sees it (it is detached before one runs).
const warmUpAlias = "__dataenv_warmup"

// WarmUp runs a small DuckLake job on the instance, on a catalog and data of its own under dir
// (removed afterwards), so that a spare runner's first job does not pay for what a process pays
// the first time it runs one: in a new process the same job cost about a fifth more CPU time than
// its second run did (the code's first calls, the allocator's first pages). The ducklake
// extension must be loaded.
func (in *Instance) WarmUp(ctx context.Context, dir string) error {
	tmp, err := os.MkdirTemp(dir, "warmup-")
	if err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	defer os.RemoveAll(tmp)
	stmts := []string{
		fmt.Sprintf("ATTACH %s AS %s (DATA_PATH %s)", quote("ducklake:"+filepath.Join(tmp, "catalog.ducklake")), warmUpAlias,
			quote(filepath.Join(tmp, "data")+string(filepath.Separator))),
		"CREATE TABLE " + warmUpAlias + ".t AS SELECT range AS id FROM range(1000)",
		"SELECT count(*) FROM " + warmUpAlias + ".t",
		"DETACH " + warmUpAlias,
	}
	for _, st := range stmts {
		rows, err := in.Conn.QueryContext(ctx, st)
		if err != nil {
			return fmt.Errorf("warm up: %s: %w", st, err)
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("warm up: %s: %w", st, err)
		}
	}
	return nil
}
