package engine_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/tests/testenv"
)

var (
	pg *testenv.Postgres
	s3 *testenv.S3
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		if pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "runner-engine"}); err != nil {
			return err
		}
		s3, err = testenv.StartS3(ctx)
		return err
	})
}

// openInstance opens DuckDB with the required extensions loaded, as a spare has it; it is closed
// at the end of the test.
func openInstance(t *testing.T) *engine.Instance {
	t.Helper()
	dir, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	in, err := engine.Open(context.Background(), dir, extension.Required...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}
