package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/client"
	"github.com/dataenv/dataenv/runner/extension"
)

// A secret of the sidecar's: readable by a plain runner (the control), not by a jailed one. It
// sits next to the runner binary too, where the sidecar's own files would be.
func TestJailCannotReadOutsideItsMounts(t *testing.T) {
	secretDir := t.TempDir()
	secrets := []string{filepath.Join(secretDir, "sidecar-secret.txt"), filepath.Join(filepath.Dir(runnerPath), "sidecar.conf")}
	for _, p := range secrets {
		if err := os.WriteFile(p, []byte("hunter2"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
	}
	plain, _ := newClient(t, client.Config{Isolation: client.IsolationPlain})
	jailed, root := newClient(t, client.Config{Isolation: client.IsolationJailed})
	for _, p := range secrets {
		job := client.Job{Blocks: []string{"SELECT * FROM read_csv(" + sqlString(p) + ", header = false, columns = {'v': 'VARCHAR'})"}}
		res, err := plain.Run(context.Background(), job)
		if err != nil || !strings.Contains(string(res.Results[0].Rows[0][0]), "hunter2") {
			t.Fatalf("control: a plain runner reads %s: %v", p, err)
		}
		_, err = jailed.Run(context.Background(), job)
		var je *client.JobError
		if !errors.As(err, &je) || !strings.Contains(err.Error(), "No files found") || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("jailed read of %s: %v; want DuckDB's no-such-file error", p, err)
		}
	}
	assertEmptyDir(t, root)
}

// A jailed job writes to its work directory (and /tmp, which is inside it) and nowhere else: not
// to a host directory, not to the system, not to the extension cache.
func TestJailCannotWriteOutsideItsWorkDir(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationJailed})
	hostDir := t.TempDir()
	for _, target := range []string{
		filepath.Join(hostDir, "escaped.csv"),
		"/usr/escaped.csv",
		"/opt/dataenv/extensions/escaped.csv",
		"/opt/dataenv/escaped.csv",
		"/escaped.csv",
		"/dev/escaped.csv",
	} {
		_, err := c.Run(context.Background(), client.Job{Blocks: []string{"COPY (SELECT 1 AS x) TO " + sqlString(target)}})
		var je *client.JobError
		if !errors.As(err, &je) {
			t.Fatalf("COPY TO %s in the jail: %v; want DuckDB's error", target, err)
		}
	}
	if entries, _ := os.ReadDir(hostDir); len(entries) != 0 {
		t.Fatalf("the jailed job wrote %s into a host directory", entries[0].Name())
	}
	if _, err := os.Stat("/usr/escaped.csv"); err == nil {
		t.Fatal("the jailed job wrote into /usr")
	}
	res, err := c.Run(context.Background(), client.Job{Blocks: []string{
		"COPY (SELECT 42 AS x) TO 'in-work-dir.csv'",
		"COPY (SELECT 43 AS x) TO '/tmp/in-jail-tmp.csv'",
		"SELECT (SELECT x FROM 'in-work-dir.csv') + (SELECT x FROM '/tmp/in-jail-tmp.csv')",
	}, CollectLastOnly: true})
	if err != nil {
		t.Fatalf("writing inside the work directory: %v", err)
	}
	if got := string(res.Results[0].Rows[0][0]); got != "85" {
		t.Fatalf("read back %s, want 85", got)
	}
	if _, err := os.Stat("/tmp/in-jail-tmp.csv"); err == nil {
		t.Fatal("the jail's /tmp is the host's /tmp")
	}
	assertEmptyDir(t, root)
}

// A plain INSTALL of an extension the cache has is a no-op inside the jail's read-only cache.
func TestJailedInstallOfCachedExtension(t *testing.T) {
	c, _ := newClient(t, client.Config{Isolation: client.IsolationJailed})
	_, err := c.Run(context.Background(), client.Job{Blocks: []string{"INSTALL ducklake", "LOAD ducklake", "INSTALL httpfs", "LOAD httpfs"}})
	if err != nil {
		t.Fatal(err)
	}
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// A jailed job sees a mounted host directory at the same path: a DuckLake with its data path
// there round-trips; a read-only mount refuses writes; the jail's own paths cannot be mounted.
func TestJailMounts(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationJailed})
	data := t.TempDir()
	schema := "lake_" + strings.ToLower(pg.NamePrefix(t))
	attach := "ATTACH " + sqlString("ducklake:postgres:"+pg.DSN(pg.CreateDatabase(t))) + " AS lake (DATA_PATH " +
		sqlString(data+"/") + ", METADATA_SCHEMA " + sqlString(schema) + ")"
	rw := []client.Mount{{Path: data, Writable: true}}
	if _, err := c.Run(context.Background(), client.Job{Mounts: rw, Blocks: []string{attach,
		"CREATE TABLE lake.t AS SELECT range AS id FROM range(3000)"}}); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(data, "main", "t", "*.parquet")); len(files) == 0 {
		t.Fatal("no parquet file in the mounted data path on the host")
	}
	ro := []client.Mount{{Path: data}}
	res, err := c.Run(context.Background(), client.Job{Mounts: ro, CollectLastOnly: true,
		Blocks: []string{attach, "SELECT count(*) FROM lake.t"}})
	if err != nil || string(res.Results[0].Rows[0][0]) != "3000" {
		t.Fatalf("read through a read-only mount: %v", err)
	}
	_, err = c.Run(context.Background(), client.Job{Mounts: ro, Blocks: []string{attach,
		"INSERT INTO lake.t SELECT range FROM range(3000)"}})
	if err == nil || !strings.Contains(err.Error(), "Read-only file system") {
		t.Fatalf("write through a read-only mount: %v", err)
	}
	for _, bad := range []string{"relative", "/", "/tmp", "/.dataenv-jail/work", "/.dataenv-jail", "/proc/self", filepath.Join(data, "missing")} {
		_, err := c.Run(context.Background(), client.Job{Mounts: []client.Mount{{Path: bad}}, Blocks: []string{"SELECT 1"}})
		if err == nil || !strings.Contains(err.Error(), "mount") {
			t.Errorf("mount %q: %v; want it refused", bad, err)
		}
	}
	assertEmptyDir(t, root)
}

// FORCE INSTALL in a jailed job is honoured outside the jail, into the cache: here, without
// access to DuckDB's repository, that attempt is what fails (with the cached binary left
// intact), not a write into the jail's read-only cache. Where the repository answers, the job
// runs with the fresh binary and a plain INSTALL inside.
func TestJailedForceInstallRunsOutside(t *testing.T) {
	src, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range extension.Required {
		copyFile(t, extension.Path(src, n), extension.Path(dir, n))
	}
	c, _ := newClient(t, client.Config{Isolation: client.IsolationJailed, ExtensionDir: dir})
	_, err = c.Run(context.Background(), client.Job{Blocks: []string{"FORCE INSTALL httpfs", "LOAD httpfs"}})
	if err != nil && !strings.Contains(err.Error(), "install DuckDB extensions for the jailed runner (FORCE INSTALL httpfs)") {
		t.Fatalf("error %v; want success or the outside install's error", err)
	}
	res, err := c.Run(context.Background(), client.Job{Blocks: []string{"INSTALL httpfs", "LOAD httpfs", "SELECT 1"}, CollectLastOnly: true})
	if err != nil || string(res.Results[0].Rows[0][0]) != "1" {
		t.Fatalf("the cached httpfs after the FORCE INSTALL: %v", err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A lake kept where people keep their work (a repository checkout under /work, say, or an
// install under /opt) is mounted at its own path: the jail's own directories are elsewhere. The
// directory is made in this module's checkout, wherever it is.
func TestJailMountsADirectoryInTheCheckout(t *testing.T) {
	c, root := newClient(t, client.Config{Isolation: client.IsolationJailed})
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(wd, ".jail-mount-test-")
	if err != nil {
		t.Fatalf("a directory in the checkout: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	out := filepath.Join(dir, "out.csv")
	if _, err := c.Run(context.Background(), client.Job{Mounts: []client.Mount{{Path: dir, Writable: true}},
		Blocks: []string{"COPY (SELECT 42 AS answer) TO " + sqlString(out)}}); err != nil {
		t.Fatalf("a job with a mount at %s: %v", dir, err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "42") {
		t.Fatalf("what the job wrote through the mount: %q, %v", b, err)
	}
	assertEmptyDir(t, root)
}
