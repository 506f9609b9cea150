package pipeline_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/tests/sidecartest"
)

func TestInstallIsIdempotentAndUninstallRemovesEverything(t *testing.T) {
	t.Parallel()
	dsn, conn := controlDB(t)
	ctx := context.Background()
	rep, err := install.Install(ctx, conn, install.Options{})
	if err != nil {
		t.Fatalf("second install: %v", err)
	}
	if len(rep.Applied) != 0 || rep.FromVersion != rep.ToVersion {
		t.Fatalf("second install applied %v (from %d to %d), want nothing", rep.Applied, rep.FromVersion, rep.ToVersion)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM dataenv.clusters WHERE name = 'instance' AND kind = 'instance'`); n != 1 {
		t.Fatalf("cluster instance registered %d times", n)
	}
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_publication_tables WHERE pubname IN ('dataenv', 'dataenv_requests') AND schemaname <> 'dataenv'`); n != 0 {
		t.Fatalf("the publication names tables outside the dataenv schema")
	}
	sc := sidecartest.Start(t, sidecartest.Options{DSN: dsn})
	sidecartest.Wait(t, conn, newRequest(t, conn, "ping", `{}`), 30*time.Second)

	if err := install.Uninstall(ctx, conn); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	for what, sql := range map[string]string{
		"slot":        `SELECT count(*) FROM pg_replication_slots WHERE database = current_database()`,
		"publication": `SELECT count(*) FROM pg_publication WHERE pubname IN ('dataenv', 'dataenv_requests')`,
		"schema":      `SELECT count(*) FROM pg_namespace WHERE nspname = 'dataenv'`,
	} {
		if n := queryInt(t, conn, sql); n != 0 {
			t.Errorf("uninstall left the %s", what)
		}
	}
	sc.Kill()
}

func TestInstallRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	_, conn := controlDB(t)
	mustExec(t, conn, `INSERT INTO dataenv.schema_migrations (version, name) VALUES (999, 'from_the_future')`)
	_, err := install.Install(context.Background(), conn, install.Options{})
	if err == nil || !strings.Contains(err.Error(), "newer than this dataenv") {
		t.Fatalf("install over a newer schema: err = %v", err)
	}
}

func TestPreflightNamesWhatToFix(t *testing.T) {
	t.Parallel()
	db := pg.CreateDatabase(t)
	role, pw := pg.CreateRole(t, "LOGIN")
	conn, err := pgx.Connect(context.Background(), pg.DSNAs(role, pw, db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = install.Install(context.Background(), conn, install.Options{})
	if !install.IsPreflight(err) || !strings.Contains(err.Error(), "CREATEROLE and REPLICATION") {
		t.Fatalf("install as an unprivileged role: err = %v, want a preflight finding about privileges", err)
	}
}
