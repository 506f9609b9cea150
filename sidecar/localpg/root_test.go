package localpg_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/sidecar/procguard"
	"github.com/dataenv/dataenv/tests/testenv"
)

// TestRootCluster starts a throwaway cluster of every matrix version from its Debian root
// (tests/setup/pgroots.sh), restarts it, crashes it, and a persistent one that is reused. A
// version without its root fails the test.
func TestRootCluster(t *testing.T) {
	versions, err := testenv.PGMatrixVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			srv, err := testenv.FindPGServer(v)
			if err != nil {
				t.Fatal(err)
			}
			if srv.Root == "" {
				t.Logf("PostgreSQL %d is installed on this machine: no root to test", v)
				return
			}
			throwawayInRoot(t, srv)
			persistentInRoot(t, srv)
		})
	}
}

func throwawayInRoot(t *testing.T, srv testenv.PGServer) {
	ctx := context.Background()
	c, err := localpg.Start(ctx, localpg.Config{Name: "root", Root: srv.Root,
		Files: map[string][]byte{"hello.txt": []byte("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(ctx) })
	if c.Major != srv.Major || !strings.HasPrefix(c.Dir, srv.Root+"/tmp/") {
		t.Fatalf("cluster %d in %s, want %d under %s/tmp", c.Major, c.Dir, srv.Major, srv.Root)
	}
	if got := queryString(t, c, "SELECT current_setting('server_version_num')"); !strings.HasPrefix(got, fmt.Sprint(srv.Major)) {
		t.Fatalf("server_version_num %s, want %d", got, srv.Major)
	}
	// A self-linked root (tests/setup/pgroots.sh makes them so) gives the server this machine's
	// paths; elsewhere (the roots seen at another path) it names paths inside the root.
	want := c.DataDir
	if target, err := os.Readlink(filepath.Join(srv.Root, srv.Root)); err != nil || target != "/" {
		want = strings.TrimPrefix(c.DataDir, srv.Root)
	}
	if got := queryString(t, c, "SELECT current_setting('data_directory')"); got != want {
		t.Fatalf("the server's data_directory is %s, want %s", got, want)
	}
	if got := queryString(t, c, "SELECT pg_read_file('hello.txt')"); got != "hi" {
		t.Fatalf("Config.Files: hello.txt holds %q", got)
	}
	mustExec(t, c.DSN("postgres"), "CREATE TABLE kept(x int); INSERT INTO kept VALUES (1); CHECKPOINT")
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, c, "SELECT x::text FROM kept"); got != "1" {
		t.Fatalf("after restart and crash: %q", got)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after Stop: %v", c.Dir, err)
	}
}

func persistentInRoot(t *testing.T, srv testenv.PGServer) {
	ctx := context.Background()
	parent, err := os.MkdirTemp(filepath.Join(srv.Root, "tmp"), "dataenv-localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "pg")
	c1, err := localpg.Start(ctx, localpg.Config{Dir: dir, Persistent: true, Root: srv.Root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c1.Stop(ctx) })
	mustExec(t, c1.DSN("postgres"), "CREATE TABLE kept(x int); INSERT INTO kept VALUES (2)")
	if err := c1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c2, err := localpg.Start(ctx, localpg.Config{Dir: dir, Persistent: true, Root: srv.Root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Stop(ctx) })
	if got := queryString(t, c2, "SELECT x::text FROM kept"); got != "2" {
		t.Fatalf("persistent cluster in a root lost its row: %q", got)
	}
	if _, err := localpg.Start(ctx, localpg.Config{Dir: filepath.Join(os.TempDir(), "outside"),
		Persistent: true, Root: srv.Root}); err == nil || !strings.Contains(err.Error(), "outside the root") {
		t.Fatalf("a directory outside the root: %v", err)
	}
}

// TestRootClusterWithoutPrivileges runs TestRootCluster as an unprivileged user (nobody): the
// server then runs in a user namespace instead of chroot + setuid. It needs root to switch user;
// without root, TestRootCluster itself takes that path.
func TestRootClusterWithoutPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: TestRootCluster already ran unprivileged")
		return
	}
	dir, err := os.MkdirTemp("", "dataenv-localpg-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	// Never recursive: the roots are mounted inside until the guard below detaches them.
	t.Cleanup(func() {
		for _, p := range []string{filepath.Join(dir, "localpg.test"), filepath.Join(dir, "pg"), dir} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove %s: %v", p, err)
			}
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "localpg.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	roots, err := testenv.PGRootsDir()
	if err != nil {
		t.Fatal(err)
	}
	// nobody may not be able to reach the repository (a clone under a 0700 home): the roots are
	// bind-mounted where it can, which also leaves them without their self-link at that path.
	view := filepath.Join(dir, "pg")
	if err := os.Mkdir(view, 0o755); err != nil {
		t.Fatal(err)
	}
	guard, err := procguard.StartUnmounting(0, []string{view})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", roots, view).CombinedOutput(); err != nil {
		_ = guard.Disarm()
		t.Fatalf("bind-mount the roots: %v %s", err, out)
	}
	t.Cleanup(func() { _ = guard.Fire() }) // before dir is removed: cleanups run last first
	cmd := exec.CommandContext(t.Context(), bin, "-test.run", "^TestRootCluster$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, testenv.PGRootsEnv+"="+view)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootCluster") {
		t.Fatalf("TestRootCluster as nobody: %v\n%s", err, out)
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func queryString(t *testing.T, c *localpg.Cluster, sql string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
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
