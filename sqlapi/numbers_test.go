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
	}{{FS, "*.sql"}, {migrations.FS, "*.up.sql"}, {SatelliteFS, "satellite/*.sql"}, {migrations.SatelliteFS, "satellite/*.up.sql"},
		{SharedFS, "shared/*.sql"}} {
		names, err := fs.Glob(c.fsys, c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, n := range names {
			num, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(n, "satellite/"), "shared/"), "_")
			if prev, ok := seen[num]; ok {
				t.Errorf("number %s is used by %s and %s: renumber the unreleased one", num, prev, n)
			}
			seen[num] = n
		}
	}
}

// A shared file is applied with the control's files and with a satellite's: its number is used by
// neither, so that a file's number names one file in each install.
func TestSharedFileNumbersAreFreeInBothInstalls(t *testing.T) {
	numbers := func(fsys fs.FS, pattern, dir string) map[string]string {
		names, err := fs.Glob(fsys, pattern)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, n := range names {
			num, _, _ := strings.Cut(strings.TrimPrefix(n, dir), "_")
			out[num] = n
		}
		return out
	}
	shared := numbers(SharedFS, "shared/*.sql", "shared/")
	if len(shared) == 0 {
		t.Fatal("no shared files: the embed pattern matched nothing")
	}
	for _, other := range []map[string]string{numbers(FS, "*.sql", ""), numbers(SatelliteFS, "satellite/*.sql", "satellite/")} {
		for num, n := range shared {
			if prev, ok := other[num]; ok {
				t.Errorf("number %s is used by %s and %s, applied in the same install: renumber the unreleased one", num, n, prev)
			}
		}
	}
}
