// Package upgrade_test installs the last release of dataenv, leaves work in flight, and upgrades
// it with this tree's `dataenv install`: every request, workspace, fork and record is kept and
// the pending and interrupted requests finish exactly once on the new sidecar.
package upgrade_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	pg         *testenv.Postgres
	releaseBin string // the dataenv binary of the release named in RELEASE
	release    string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		rev, err := os.ReadFile("RELEASE")
		if err != nil {
			return err
		}
		release = strings.TrimSpace(string(rev))
		if releaseBin, err = sidecartest.BuildRelease(release); err != nil {
			return err
		}
		if pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "upgrade"}); err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}
