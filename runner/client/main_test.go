package client_test

import (
	"context"
	"os"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	runnerPath string
	pg         *testenv.Postgres
	s3         *testenv.S3
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if runnerPath, err = testenv.BuildRunner(ctx); err != nil {
			return err
		}
		if pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "runner-client"}); err != nil {
			return err
		}
		s3, err = testenv.StartS3(ctx)
		return err
	})
}

// newClient returns a client whose work directories live in a test directory, so tests can check
// they are removed.
func newClient(t *testing.T, cfg client.Config) (*client.Client, string) {
	t.Helper()
	cfg.RunnerPath = runnerPath
	// DATAENV_TEST_JAIL=nsjail runs the jailed tests under nsjail (default: nsjail when on
	// PATH, else bubblewrap).
	cfg.Jail = os.Getenv("DATAENV_TEST_JAIL")
	if cfg.WorkRoot == "" {
		cfg.WorkRoot = t.TempDir()
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg.WorkRoot
}

var modes = []client.Isolation{client.IsolationPlain, client.IsolationUnshare, client.IsolationJailed}

// assertEmptyDir fails when dir holds anything: work directories must be removed.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("%s still holds %d entries (first %s): work directories must be removed", dir, len(entries), entries[0].Name())
	}
}
