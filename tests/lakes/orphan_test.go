package lakes_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
)

// runOutside runs sql in a plain runner, without dataenv: the test's own privileged setup.
func runOutside(t *testing.T, sql string) {
	t.Helper()
	c, err := client.New(client.Config{RunnerPath: runnerPath, Isolation: client.IsolationPlain, WorkRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Run(context.Background(), client.Job{Blocks: []string{sql}}); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Why fork data lives at the storage root: a fork data path nested under the parent's data path
// is listed for deletion by the parent's orphan-file cleanup (dry run); dataenv's fork prefix
// (__dataenv_forks/<segment>/...) is not.
func TestParentOrphanCleanupSparesForkData(t *testing.T) {
	e, url := lakeEnv(t, storageKinds[0])
	dir := strings.TrimPrefix(url, "file://")
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	// A fork done wrong: its namespace's DATA_PATH nested under the parent's, written by a
	// runner of the test's own (a job may attach nothing but its own lakes).
	runOutside(t, fmt.Sprintf(`ATTACH 'ducklake:postgres:%s' AS nested (METADATA_SCHEMA 'nested_fork', DATA_PATH '%s/lakes/main/nested_fork/');
		CREATE TABLE nested.t AS SELECT range AS id FROM range(3000)`, pg.DSN(e.catalog), dir))
	// dataenv's fork.
	e.workspace("dev", "prod")
	e.materialize("dev", "ducklake://main/t", "SELECT range AS id FROM range(3000)", "replace")
	if keys := listKeys(t, url, "__dataenv_forks/"); len(keys) == 0 {
		t.Fatal("dataenv's fork wrote no files")
	}
	r := e.run("prod", attachMain+"CALL ducklake_delete_orphaned_files('dl', dry_run => true, cleanup_all => true)")
	listed := r.rowsText()
	if !strings.Contains(listed, "nested_fork/") {
		t.Fatalf("the nested fork's files are not listed by the parent's orphan cleanup: %s", listed)
	}
	if strings.Contains(listed, "__dataenv_forks") {
		t.Fatalf("dataenv's fork files are listed by the parent's orphan cleanup: %s", listed)
	}
	if got := e.count("dev", "t"); got != "3000" {
		t.Fatalf("dev reads %s", got)
	}
}
