package localpg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestThrowawayCluster(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Config{Name: "unit"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var walLevel, fsync string
	if err := conn.QueryRow(ctx, "SELECT current_setting('wal_level'), current_setting('fsync')").Scan(&walLevel, &fsync); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if walLevel != "logical" || fsync != "off" {
		t.Fatalf("wal_level=%s fsync=%s, want logical/off", walLevel, fsync)
	}
	pid := c.PID()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("dir %s still there after Stop: %v", c.Dir, err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("postmaster %d still alive after Stop", pid)
	}
}

func TestPersistentClusterIsReused(t *testing.T) {
	ctx := context.Background()
	// Not t.TempDir: it is 0700 and the postgres user must be able to enter it.
	parent, err := os.MkdirTemp("", "dataenv-localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "pg")
	c1, err := Start(ctx, Config{Dir: dir, Persistent: true, Name: "persist"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c1.Stop(ctx) })
	mustExec(t, c1.DSN("postgres"), "CREATE TABLE kept(x int); INSERT INTO kept VALUES (42)")
	// A second Start attaches to the running server.
	c2, err := Start(ctx, Config{Dir: dir, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Port() != c1.Port() || c2.SuperPassword != c1.SuperPassword {
		t.Fatalf("attached cluster differs: port %d/%d", c2.Port(), c1.Port())
	}
	if err := c1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Start after Stop: the stopped cluster is started again with its data.
	c3, err := Start(ctx, Config{Dir: dir, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c3.Stop(ctx) })
	conn, err := pgx.Connect(ctx, c3.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var x int
	if err := conn.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Fatalf("kept row: %d, %v", x, err)
	}
	if err := c3.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		t.Fatalf("persistent data dir gone: %v", err)
	}
}

func mustExec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

func TestRestartAndCrashKeepPortAndData(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Config{Name: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	port := c.Port()
	mustExec(t, c.DSN("postgres"), "CREATE TABLE kept(x int); INSERT INTO kept VALUES (7); CHECKPOINT")
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port() != port {
		t.Fatalf("port changed from %d to %d", port, c.Port())
	}
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var x int
	err = conn.QueryRow(ctx, "SELECT x FROM kept").Scan(&x)
	conn.Close(ctx)
	if err != nil || x != 7 {
		t.Fatalf("after restart and crash: x=%d err=%v", x, err)
	}
	pid := c.PID()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("postmaster %d alive after Stop", pid)
	}
	if err := c.Restart(ctx); err == nil {
		t.Fatal("Restart after Stop succeeded")
	}
}

func TestLongDirectoryPutsSocketElsewhere(t *testing.T) {
	ctx := context.Background()
	parent, err := os.MkdirTemp("", "dataenv-localpg-long-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, strings.Repeat("long-directory-name-", 5), "pg")
	c, err := Start(ctx, Config{Dir: dir, Name: "long"})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(c.SocketDir) == dir {
		t.Fatalf("socket dir %s inside a %d-byte path", c.SocketDir, len(dir))
	}
	sock := c.SocketDir
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, sock} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s still there after Stop: %v", p, err)
		}
	}
}
