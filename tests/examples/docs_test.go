package examples_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// docFiles are the Markdown files whose SQL blocks must run: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	return files
}

// Every SQL block of README.md and docs/*.md runs as the convention in main_test.go says, in one
// psql session per file against a fresh dataenv dev: the examples a reader copies work as shown.
func TestDocumentationBlocks(t *testing.T) {
	for _, name := range docFiles(t) {
		blocks := readBlocks(t, filepath.Join(repoRoot(), name), name)
		runnable := 0
		for _, b := range blocks {
			if b.Mode != modeNoRun {
				runnable++
			}
		}
		if runnable == 0 {
			continue
		}
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			dev := startDev(t)
			out, err := psql(t, dev.DSN, "-", script(blocks))
			if err != nil {
				t.Fatalf("%s: %v (the last '>>> doc block' line names the block that broke)\n%s", name, err, out)
			}
			t.Logf("%s: %d blocks run, %d not run", name, runnable, len(blocks)-runnable)
		})
	}
}
