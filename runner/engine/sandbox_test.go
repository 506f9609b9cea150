package engine_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/extension"
	"github.com/dataenv/dataenv/runner/protocol"
)

// What DuckDB 1.5.5 really enforces once a job is sandboxed (protocol.Sandbox): each statement
// is run as a job's own SQL after dataenv's setup, on real DuckDB, against a real Postgres and a
// real S3 server. runner/README.md quotes these results.

// sandboxed runs setup, then the sandbox, then each block as a job of its own on one instance
// (so that a failing block does not hide the next), and returns each block's error ("" when it
// succeeded) and its rows.
type sandboxed struct {
	t  *testing.T
	in *engine.Instance
}

func newSandboxed(t *testing.T, sb *protocol.Sandbox, setup ...string) *sandboxed {
	return newSandboxedOn(t, openInstance(t), sb, setup...)
}

// newSandboxedOn is newSandboxed on in (a spare's, say).
func newSandboxedOn(t *testing.T, in *engine.Instance, sb *protocol.Sandbox, setup ...string) *sandboxed {
	t.Helper()
	dir, err := extension.Dir()
	if err != nil {
		t.Fatal(err)
	}
	req := &protocol.Request{Setup: setup, Sandbox: sb, Blocks: []string{"SELECT 1"},
		TempDirectory: filepath.Join(t.TempDir(), "spill"), ExtensionDirectory: dir}
	if resp := engine.RunOn(context.Background(), in, req, nil); resp.Error != "" {
		t.Fatalf("setup and sandbox: block %d: %s", resp.ErrorBlock, resp.Error)
	}
	return &sandboxed{t: t, in: in}
}

// run runs one job block on the sandboxed instance.
func (s *sandboxed) run(block string) (errText string, rows string) {
	s.t.Helper()
	resp := engine.RunOn(context.Background(), s.in, &protocol.Request{Blocks: []string{block}}, nil)
	if resp.Error != "" {
		return resp.Error, ""
	}
	var out []string
	for _, r := range resp.Results[0].Rows {
		var cells []string
		for _, c := range r {
			cells = append(cells, strings.Trim(string(c), `"`))
		}
		out = append(out, strings.Join(cells, ","))
	}
	return "", strings.Join(out, ";")
}

// refused asserts that block fails with an error containing want.
func (s *sandboxed) refused(block, want string) {
	s.t.Helper()
	if err, rows := s.run(block); !strings.Contains(err, want) {
		s.t.Errorf("%s: error %q rows %q; want an error with %q", block, err, rows, want)
	}
}

// ok asserts that block succeeds and returns its rows.
func (s *sandboxed) ok(block string) string {
	s.t.Helper()
	err, rows := s.run(block)
	if err != "" {
		s.t.Errorf("%s: %s", block, err)
	}
	return rows
}

// pgSecret is a temporary DuckDB postgres secret for role on the harness cluster.
func pgSecret(name, role, password, db string) string {
	return fmt.Sprintf("CREATE TEMPORARY SECRET %s (TYPE postgres, HOST %s, PORT %d, USER %s, PASSWORD %s, DATABASE %s)",
		name, sqlString(pg.Host()), pg.Port(), sqlString(role), sqlString(password), sqlString(db))
}

// After the sandbox no new database can be attached (Postgres, DuckLake over Postgres, a DuckDB
// file), while what setup attached keeps working once its secret is gone.
func TestSandboxRefusesNewAttaches(t *testing.T) {
	role, pw := pg.CreateRole(t, "LOGIN")
	db, other := pg.CreateDatabase(t), pg.CreateDatabase(t)
	mustExecDB(t, db, fmt.Sprintf("CREATE TABLE t AS SELECT 7 AS x; GRANT SELECT ON t TO %s", role))
	s := newSandboxed(t, &protocol.Sandbox{}, pgSecret("s", role, pw, db),
		fmt.Sprintf("ATTACH %s AS given (TYPE postgres, SECRET s)", sqlString("dbname="+db)), "DROP SECRET s")
	if got := s.ok("SELECT x FROM given.public.t"); got != "7" {
		t.Errorf("the attached database after its secret's drop: %q", got)
	}
	s.refused(fmt.Sprintf("ATTACH %s AS o (TYPE postgres)", sqlString(fmt.Sprintf("dbname=%s host=%s port=%d user=%s password=%s",
		other, pg.Host(), pg.Port(), role, pw))), "Attaching Postgres databases is disabled through configuration")
	s.refused(fmt.Sprintf("ATTACH %s AS l (DATA_PATH %s)", sqlString("ducklake:postgres:dbname="+other), sqlString(t.TempDir()+"/")),
		"disabled through configuration")
	s.refused(fmt.Sprintf("ATTACH %s AS f", sqlString(filepath.Join(t.TempDir(), "x.duckdb"))), "disabled by configuration")
	if got := s.ok("SELECT count(*) FROM duckdb_secrets() WHERE type = 'postgres'"); got != "0" {
		t.Errorf("postgres secrets left for the job: %s", got)
	}
}

// Files and URLs: only the allowed directories (and DuckDB's temporary directory), no way out
// through "..", no glob outside them.
func TestSandboxConfinesFiles(t *testing.T) {
	lake, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.csv"), []byte("x\nsecret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSandboxed(t, &protocol.Sandbox{AllowedDirectories: []string{lake + "/"}})
	s.ok(fmt.Sprintf("COPY (SELECT 42 AS x) TO %s", sqlString(lake+"/a.parquet")))
	if got := s.ok(fmt.Sprintf("SELECT x FROM read_parquet(%s)", sqlString(lake+"/*.parquet"))); got != "42" {
		t.Errorf("read back from the allowed directory: %q", got)
	}
	for _, q := range []string{
		fmt.Sprintf("SELECT * FROM read_csv(%s)", sqlString(filepath.Join(outside, "secret.csv"))),
		fmt.Sprintf("SELECT * FROM read_csv(%s)", sqlString(lake+"/../"+filepath.Base(outside)+"/secret.csv")),
		fmt.Sprintf("COPY (SELECT 1) TO %s", sqlString(filepath.Join(outside, "out.csv"))),
		fmt.Sprintf("SELECT * FROM glob(%s)", sqlString(outside+"/*")),
		"SELECT * FROM read_text('/proc/self/environ')",
		"SELECT * FROM read_csv('http://127.0.0.1:1/x.csv')",
	} {
		s.refused(q, "disabled by configuration")
	}
	if _, err := os.Stat(filepath.Join(outside, "out.csv")); err == nil {
		t.Error("a file was written outside the allowed directories")
	}
	// Spilling still works: the temporary directory is DuckDB's own.
	s.ok("SELECT count(*) FROM (SELECT md5(range::varchar) AS m FROM range(300000) ORDER BY m)")
}

// The job cannot undo the sandbox or load code: configuration is locked (but TimeZone), no
// INSTALL, no LOAD of a file; the same on a spare's instance, which set part of the sandbox
// before its job arrived.
func TestSandboxLocksConfiguration(t *testing.T) {
	for _, preset := range []bool{false, true} {
		t.Run(fmt.Sprintf("preset=%v", preset), func(t *testing.T) {
			in := openInstance(t)
			if preset {
				if err := in.PresetSandbox(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			lockedSandbox(t, newSandboxedOn(t, in, &protocol.Sandbox{AllowedDirectories: []string{t.TempDir() + "/"}}))
		})
	}
}

func lockedSandbox(t *testing.T, s *sandboxed) {
	for _, q := range []string{"SET enable_external_access = true", "SET allowed_directories = ['/']", "RESET allowed_directories",
		"SET allowed_paths = ['/etc/passwd']", "SET lock_configuration = false", "SET allowed_configs = ['memory_limit']",
		"SET memory_limit = '100TB'", "SET s3_url_compatibility_mode = false", "SET s3_endpoint = 'evil:80'",
		"SET autoinstall_known_extensions = true", "SET allow_unsigned_extensions = true"} {
		s.refused(q, "the configuration has been locked")
	}
	for name, want := range map[string]string{"autoinstall_known_extensions": "false", "allow_community_extensions": "false",
		"s3_url_compatibility_mode": "true", "allowed_configs": "[TimeZone]", "enable_external_access": "false"} {
		if got := s.ok("SELECT current_setting('" + name + "')::VARCHAR"); got != want {
			t.Errorf("%s is %s in the sandbox; want %s", name, got, want)
		}
	}
	s.refused("INSTALL spatial", "disabled by configuration")
	s.refused(fmt.Sprintf("LOAD %s", sqlString(filepath.Join(t.TempDir(), "x.duckdb_extension"))), "disabled through configuration")
	s.ok("SET TimeZone = 'UTC'")
}

// An S3 secret stays for the job's lake files, scoped to its prefixes; with
// s3_url_compatibility_mode a query parameter cannot send a request signed with it (key id,
// signature, a session token when there is one) to another endpoint, and another bucket or
// prefix is refused.
func TestSandboxS3(t *testing.T) {
	bucket := s3.Bucket(t)
	evil := listen(t)
	secret := fmt.Sprintf("CREATE TEMPORARY SECRET s3s (TYPE s3, KEY_ID %s, SECRET %s, REGION %s, ENDPOINT %s, URL_STYLE 'path', USE_SSL false, SCOPE %s)",
		sqlString(s3.AccessKey), sqlString(s3.SecretKey), sqlString(s3.Region), sqlString(s3.Endpoint), sqlString("s3://"+bucket+"/"))
	s := newSandboxed(t, &protocol.Sandbox{AllowedDirectories: []string{"s3://" + bucket + "/lake/"}}, secret)
	s.ok(fmt.Sprintf("COPY (SELECT 5 AS x) TO %s", sqlString("s3://"+bucket+"/lake/a.parquet")))
	if got := s.ok(fmt.Sprintf("SELECT x FROM read_parquet(%s)", sqlString("s3://"+bucket+"/lake/a.parquet"))); got != "5" {
		t.Errorf("read back: %q", got)
	}
	_, _ = s.run(fmt.Sprintf("SELECT * FROM read_parquet(%s)", sqlString("s3://"+bucket+"/lake/a.parquet?s3_endpoint="+evil.addr)))
	_, _ = s.run(fmt.Sprintf("SELECT * FROM read_parquet(%s)", sqlString("s3://"+bucket+"/lake/a.parquet?s3_endpoint="+evil.addr+"&s3_url_style=path")))
	if n := evil.count(); n != 0 {
		t.Errorf("%d connection(s) reached another endpoint through an s3:// URL parameter", n)
	}
	s.refused(fmt.Sprintf("COPY (SELECT 1) TO %s", sqlString("s3://"+bucket+"/elsewhere/x.parquet")), "disabled by configuration")
	s.refused(fmt.Sprintf("SELECT * FROM read_parquet(%s)", sqlString("s3://other-"+bucket+"/lake/a.parquet")), "disabled by configuration")
	s.refused(fmt.Sprintf("SELECT * FROM read_parquet(%s)", sqlString("s3://"+bucket+"/lakeX/a.parquet")), "disabled by configuration")
}

// What the sandbox does NOT stop, and why the Postgres role is the boundary of last resort:
// postgres_scan opens a connection from a connection string even with external access off,
// and postgres_query runs any SQL on an attached database as the role it was attached with. With
// no secret left, a connection string has no password to offer.
func TestSandboxLeavesPostgresToTheRole(t *testing.T) {
	role, pw := pg.CreateRole(t, "LOGIN")
	db, other := pg.CreateDatabase(t), pg.CreateDatabase(t)
	mustExecDB(t, other, "CREATE TABLE secret AS SELECT 'x' AS v")
	s := newSandboxed(t, &protocol.Sandbox{}, pgSecret("s", role, pw, db),
		fmt.Sprintf("ATTACH %s AS given (TYPE postgres, SECRET s)", sqlString("dbname="+db)), "DROP SECRET s")
	if got := s.ok("SELECT * FROM postgres_query('given', 'SELECT current_user')"); got != role {
		t.Errorf("postgres_query runs as %q, want %q", got, role)
	}
	conn := fmt.Sprintf("dbname=%s host=%s port=%d user=%s", other, pg.Host(), pg.Port(), role)
	s.refused(fmt.Sprintf("SELECT * FROM postgres_scan(%s, 'public', 'secret')", sqlString(conn)), "no password supplied")
	// Given the password, it connects: only the role's privileges stop it.
	s.refused(fmt.Sprintf("SELECT * FROM postgres_scan(%s, 'public', 'secret')", sqlString(conn+" password="+pw)),
		"permission denied for table secret")
}

// evilServer counts the connections an address receives.
type evilServer struct {
	addr string
	mu   sync.Mutex
	n    int
}

func listen(t *testing.T) *evilServer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e := &evilServer{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.n++
			e.mu.Unlock()
			c.Close()
		}
	}()
	return e
}

func (e *evilServer) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

func mustExecDB(t *testing.T, db, sql string) {
	t.Helper()
	conn := pg.Connect(t, db)
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
