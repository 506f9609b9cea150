package lakes_test

import (
	"fmt"
	"strings"
	"testing"
)

// Why fork data lives at the storage root: a fork data path nested under the parent's data path
// is listed for deletion by the parent's orphan-file cleanup (dry run); dataenv's fork prefix
// (__dataenv_forks/<segment>/...) is not.
func TestParentOrphanCleanupSparesForkData(t *testing.T) {
	e, url := lakeEnv(t, storageKinds[0])
	dir := strings.TrimPrefix(url, "file://")
	e.materialize("prod", "ducklake://main/orders", ordersQuery, "replace")
	// A fork done wrong: its namespace's DATA_PATH nested under the parent's (the job attaches
	// the lake too, so that a jailed runner has the parent's data directory mounted).
	e.run("prod", fmt.Sprintf(attachMain+`ATTACH 'ducklake:postgres:%s' AS nested (METADATA_SCHEMA 'nested_fork', DATA_PATH '%s/lakes/main/nested_fork/');
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
