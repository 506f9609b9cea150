package testenv_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/tests/testenv"
)

// Package-wide components, started once by TestMain as every test package does.
var (
	control  *testenv.Postgres
	external *testenv.Postgres
	s3       *testenv.S3
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		if control, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		if external, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "external"}); err != nil {
			return err
		}
		s3, err = testenv.StartS3(ctx)
		return err
	})
}
