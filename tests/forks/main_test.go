// Package forks_test proves workspaces, fork chains and datatable forks end to end: SQL in a real
// control database, the real dataenv sidecar binary, a second real cluster administered by a
// non-superuser admin.
package forks_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// control holds the control databases (and is the "instance" cluster); external is administered
// by a non-superuser CREATEDB CREATEROLE admin.
var control, external *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		if control, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"}); err != nil {
			return err
		}
		if external, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "external"}); err != nil {
			return err
		}
		_, err = sidecartest.Binary()
		return err
	})
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))
