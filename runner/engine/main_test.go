package engine_test

import (
	"context"
	"testing"

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
