package pgtool_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestForPicksTheOldestSetAtLeastAsNew: with the machine's tools and those of the matrix roots,
// each server version gets tools of its own major version, and one newer than every set is
// refused with both versions named.
func TestForPicksTheOldestSetAtLeastAsNew(t *testing.T) {
	ctx := context.Background()
	f := pgtool.NewFinder(testenv.PGToolDirs())
	sets := f.Sets(ctx)
	versions, err := testenv.PGMatrixVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		s, err := f.For(ctx, fmt.Sprintf("%d.3 (Debian %d.3-1)", v, v))
		if err != nil {
			t.Fatalf("PostgreSQL %d: %v (sets %+v)", v, err, sets)
		}
		if s.Major != v {
			t.Fatalf("PostgreSQL %d got tools %d in %s", v, s.Major, s.Dir)
		}
		out, err := exec.CommandContext(ctx, s.Path(pgtool.PgRestore), "--version").Output()
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("(PostgreSQL) %d.", v)) {
			t.Fatalf("%s --version: %q, %v", s.Path(pgtool.PgRestore), out, err)
		}
	}
	newest := sets[len(sets)-1]
	_, err = f.For(ctx, fmt.Sprintf("%d.0", newest.Major+1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PostgreSQL %d.0", newest.Major+1)) ||
		!strings.Contains(err.Error(), newest.Version) {
		t.Fatalf("a server newer than every tool set: %v, want an error naming %d.0 and %s", err, newest.Major+1, newest.Version)
	}
}

// TestWithoutNewerToolsTheErrorNamesBothVersions: a finder limited to the machine's own tools
// refuses a newer server instead of failing later in pg_dump.
func TestWithoutNewerToolsTheErrorNamesBothVersions(t *testing.T) {
	ctx := context.Background()
	own := pgtool.NewFinder(nil).Sets(ctx)
	if len(own) == 0 {
		t.Fatal("no PostgreSQL client tools on this machine (make deps installs them)")
	}
	newest := own[len(own)-1]
	_, err := pgtool.NewFinder(nil).For(ctx, fmt.Sprintf("%d.1", newest.Major+1))
	if err == nil || !strings.Contains(err.Error(), newest.Version) || !strings.Contains(err.Error(), "--pg-tools-dirs") {
		t.Fatalf("%v", err)
	}
}

func TestMajor(t *testing.T) {
	for in, want := range map[string]int{"18.1 (Debian 18.1-1.pgdg+1)": 18, "17beta2": 17, "15.18": 15, " 16.4 ": 16} {
		if got, err := pgtool.Major(in); err != nil || got != want {
			t.Errorf("Major(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := pgtool.Major("devel"); err == nil {
		t.Error(`Major("devel") succeeded`)
	}
}
