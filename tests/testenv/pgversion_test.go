package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/testenv"
)

// TestEveryMatrixVersionStarts: StartPostgres gives a cluster of each matrix version (from its
// root), a managed admin works on it, and a TLS-only cluster follows DATAENV_TEST_PG_VERSION.
func TestEveryMatrixVersionStarts(t *testing.T) {
	versions, err := testenv.PGMatrixVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			ctx := context.Background()
			pg, err := testenv.StartPostgres(ctx, testenv.PGOptions{Name: fmt.Sprintf("v%d", v), Version: v})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pg.Stop(context.Background()) })
			if pg.Major != v {
				t.Fatalf("Major = %d, want %d", pg.Major, v)
			}
			admin, password := pg.CreateManagedAdmin(t)
			conn := pg.ConnectAs(t, admin, password, "postgres")
			if got := testenv.Query[int](t, conn, "SELECT current_setting('server_version_num')::int / 10000"); got != v {
				t.Fatalf("server_version_num says %d, want %d", got, v)
			}
			db := pg.NamePrefix(t) + "db"
			testenv.MustExec(t, conn, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())

			t.Setenv(testenv.PGVersionEnv, fmt.Sprint(v))
			tls := testenv.StartTLSOnlyCluster(t, fmt.Sprintf("tls%d", v))
			if tls.Major != v {
				t.Fatalf("TLS-only cluster runs %d, want %d", tls.Major, v)
			}
		})
	}
}

// TestMissingVersionFails: a version neither installed nor prepared is an error that says what
// to run, never a skip.
func TestMissingVersionFails(t *testing.T) {
	t.Setenv(testenv.PGVersionEnv, "99")
	_, err := testenv.StartPostgres(context.Background(), testenv.PGOptions{Name: "v99"})
	if err == nil || !strings.Contains(err.Error(), "make deps") {
		t.Fatalf("PostgreSQL 99: %v, want an error naming make deps", err)
	}
}
