// Package dev_test runs `dataenv dev` as a user would: from a directory postgres may not enter,
// with the default metrics port taken, twice on one directory, and with --reset.
package dev_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/tests/devtest"
	"github.com/dataenv/dataenv/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, nil) }

func ping(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var id string
	if err := conn.QueryRow(ctx, `SELECT dataenv.ping()::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM dataenv.wait($1::uuid, '60 s')`, id).Scan(&status); err != nil || status != "succeeded" {
		t.Fatalf("ping through dataenv dev: %s %v", status, err)
	}
}

// holdPort keeps addr busy for the test (if another process already has it, it is busy anyway).
func holdPort(t *testing.T, addr string) {
	if ln, err := net.Listen("tcp", addr); err == nil {
		t.Cleanup(func() { ln.Close() })
	}
}

// A clone under a directory postgres cannot enter (root's 0700 home on a fresh machine), with the
// default metrics port taken: dev still starts, says where the cluster went and which port it
// chose, and a second dev on the same directory says where the first runs and leaves it alone.
func TestDevFromUnreachableDirWithDefaultPortTaken(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "clone", ".dataenv")
	t.Cleanup(func() { devtest.RemoveRelocated(dir) }) // after the instances stop (cleanups run last first)
	holdPort(t, "127.0.0.1:9750")
	first := devtest.Start(t, dir)
	if first.Addr == "127.0.0.1:9750" {
		t.Fatalf("dev reports the taken port 9750:\n%s", first.Out.String())
	}
	ping(t, first.DSN)
	if os.Geteuid() == 0 && !strings.Contains(first.Out.String(), "The local cluster lives in") {
		t.Fatalf("as root under a 0700 parent, dev does not say where the cluster went:\n%s", first.Out.String())
	}

	second := devtest.Run(t, dir)
	text := second.ExitText(t)
	if second.Cmd.ProcessState.ExitCode() == 0 || !strings.Contains(text, "already runs for") || !strings.Contains(text, first.DSN) {
		t.Fatalf("a second dev on the same directory: exit %v\n%s", second.Cmd.ProcessState, text)
	}
	ping(t, first.DSN) // the first instance and its cluster are untouched
}

// An address the user chose that is taken is an error naming --http-addr, before dev says it
// runs; --reset starts from scratch.
func TestDevBusyExplicitPortAndReset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".dataenv")
	t.Cleanup(func() { devtest.RemoveRelocated(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := devtest.Run(t, dir, "--http-addr", ln.Addr().String())
	text := busy.ExitText(t)
	if !strings.Contains(text, "--http-addr") || strings.Contains(text, "dataenv is running") {
		t.Fatalf("dev on a taken --http-addr:\n%s", text)
	}

	p := devtest.Start(t, dir, "--http-addr", "127.0.0.1:0")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.DSN)
	if err != nil {
		t.Fatal(err)
	}
	prepared := preparedState(t, conn)
	want := "ready=t catalog=lake_catalog storage=file://" + filepath.Join(dir, "lake") + " requests=setup_cluster:succeeded,create_database:succeeded"
	if prepared != want {
		t.Fatalf("dev prepared:\n got %s\nwant %s", prepared, want)
	}
	if _, err := conn.Exec(ctx, `SELECT dataenv.create_workspace('before_reset')`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	p.Stop(t)

	// A restart finds everything prepared and makes no request.
	again := devtest.Start(t, dir, "--http-addr", "127.0.0.1:0")
	if conn, err = pgx.Connect(ctx, again.DSN); err != nil {
		t.Fatal(err)
	}
	if got := preparedState(t, conn); got != want {
		t.Fatalf("after a restart dev prepared:\n got %s\nwant %s", got, want)
	}
	conn.Close(ctx)
	again.Stop(t)

	r := devtest.Start(t, dir, "--reset", "--http-addr", "127.0.0.1:0")
	if conn, err = pgx.Connect(ctx, r.DSN); err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM dataenv.workspaces`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("after --reset: %d workspaces (%v)", n, err)
	}
}

// preparedState is what dev prepares for the quickstart, and the requests it took.
func preparedState(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	return testenv.QueryText(t, conn, `SELECT format('ready=%s catalog=%s storage=%s requests=%s',
		(SELECT ready FROM dataenv.cluster_info WHERE name = 'instance'),
		(SELECT string_agg(name, ',') FROM dataenv.managed_database_list WHERE cluster = 'instance'),
		(SELECT url FROM dataenv.storage_info WHERE name = 'local'),
		(SELECT string_agg(kind || ':' || status, ',' ORDER BY created_at) FROM dataenv.requests))`)
}
