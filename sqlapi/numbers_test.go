package sqlapi

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/migrations"
)

// Parallel branches each pick a file number; a merge can bring two files with the same number,
// whose relative order then depends on the rest of their names (a migration's number is also its
// version in dataenv.schema_migrations).
func TestEveryFileNumberIsUsedOnce(t *testing.T) {
	for _, c := range []struct {
		fsys    fs.FS
		pattern string
	}{{FS, "*.sql"}, {migrations.FS, "*.up.sql"}, {SatelliteFS, "satellite/*.sql"}, {migrations.SatelliteFS, "satellite/*.up.sql"}} {
		names, err := fs.Glob(c.fsys, c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, n := range names {
			num, _, _ := strings.Cut(strings.TrimPrefix(n, "satellite/"), "_")
			if prev, ok := seen[num]; ok {
				t.Errorf("number %s is used by %s and %s: renumber the unreleased one", num, prev, n)
			}
			seen[num] = n
		}
	}
}
