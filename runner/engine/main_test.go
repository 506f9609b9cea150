package engine_test

import (
	"context"
	"testing"

	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) (err error) {
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "runner-engine"})
		return err
	})
}
