package migrations

import (
	"io/fs"
	"strings"
	"testing"
)

// Parallel branches each pick a file number; a merge can bring two files with the same number,
// whose relative order then depends on the rest of their names.
func TestEveryFileNumberIsUsedOnce(t *testing.T) {
	names, err := fs.Glob(FS, "*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range names {
		num, _, _ := strings.Cut(n, "_")
		if prev, ok := seen[num]; ok {
			t.Errorf("migration number %s is used by %s and %s: renumber the unreleased one", num, prev, n)
		}
		seen[num] = n
	}
}
