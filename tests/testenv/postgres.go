package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/localpg"
)

// PGOptions describes a cluster to start.
type PGOptions struct {
	// Name labels the cluster ("control", "external", ...) in directory names and logs.
	Name string
	// Settings are extra postgresql.conf settings (local clusters) or -c flags (Docker).
	Settings map[string]string
	// Logger receives start/stop events. Default: discard, or stderr when DATAENV_TEST_VERBOSE=1.
	Logger *slog.Logger
	// Dir is the cluster's directory (must not exist or be empty; inside the version's root when
	// it runs from one). Default: a new temporary directory.
	Dir string
	// Version is the PostgreSQL major version to start. 0: $DATAENV_TEST_PG_VERSION, else the
	// machine's own. A version the machine does not carry runs from the root
	// tests/setup/pgroots.sh prepared (FindPGServer); without one, StartPostgres fails.
	Version int
}

// LocalConfig is the localpg configuration StartPostgres uses for opts: the version's binaries or
// root (for a test that starts a cluster through localpg itself).
func (o PGOptions) LocalConfig() (localpg.Config, error) {
	cfg := localpg.Config{Name: o.Name, Settings: o.Settings, Logger: o.Logger, Dir: o.Dir}
	v, err := o.version()
	if err != nil || v == 0 {
		return cfg, err
	}
	srv, err := FindPGServer(v)
	if err != nil {
		return cfg, err
	}
	cfg.BinDir, cfg.Root = srv.BinDir, srv.Root
	return cfg, nil
}

func (o PGOptions) version() (int, error) {
	if o.Version != 0 {
		return o.Version, nil
	}
	return RequestedPGVersion()
}

// Postgres is a running PostgreSQL cluster for tests: wal_level=logical, room for 40
// replication slots, a superuser reachable over TCP at Host():Port().
type Postgres struct {
	Name          string
	SuperUser     string
	SuperPassword string
	// Docker reports whether the cluster runs in a container (testcontainers-go).
	Docker bool
	// Cluster is the local cluster (nil under Docker): its LogFile helps when a test fails.
	Cluster *localpg.Cluster
	// Major is the server's major version.
	Major int

	host string
	port int
	stop func(ctx context.Context) error

	stopOnce sync.Once
	stopErr  error
}

// StartPostgres starts a cluster and registers it to be stopped by Main. With
// DATAENV_TEST_DOCKER=1 and a Docker engine that answers, the cluster is a postgres:<version>
// container (DockerImage by default); otherwise it is a throwaway local cluster
// (sidecar/localpg) of opts.Version, $DATAENV_TEST_PG_VERSION or the machine's version.
func StartPostgres(ctx context.Context, opts PGOptions) (*Postgres, error) {
	if opts.Name == "" {
		opts.Name = "pg"
	}
	if opts.Logger == nil {
		opts.Logger = defaultLogger()
	}
	var p *Postgres
	var err error
	if os.Getenv("DATAENV_TEST_DOCKER") == "1" && dockerAnswers(ctx) {
		p, err = startDockerPostgres(ctx, opts)
	} else {
		p, err = startLocalPostgres(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("testenv: start postgres %q: %w", opts.Name, err)
	}
	RegisterCleanup("postgres "+opts.Name, p.Stop)
	return p, nil
}

func startLocalPostgres(ctx context.Context, opts PGOptions) (*Postgres, error) {
	cfg, err := opts.LocalConfig()
	if err != nil {
		return nil, err
	}
	c, err := localpg.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Postgres{
		Name: opts.Name, SuperUser: c.SuperUser, SuperPassword: c.SuperPassword, Cluster: c,
		Major: c.Major, host: c.Host(), port: c.Port(), stop: c.Stop,
	}, nil
}

func defaultLogger() *slog.Logger {
	if os.Getenv("DATAENV_TEST_VERBOSE") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// Stop stops the cluster (and removes a local one). Main calls it; calling it again is a no-op.
func (p *Postgres) Stop(ctx context.Context) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(ctx) })
	return p.stopErr
}

// Host is the address the server listens on.
func (p *Postgres) Host() string { return p.host }

// Port is the server's TCP port.
func (p *Postgres) Port() int { return p.port }

// DSN is a URL connection string for the superuser (sslmode=disable).
func (p *Postgres) DSN(dbname string) string { return p.DSNAs(p.SuperUser, p.SuperPassword, dbname) }

// DSNAs is a URL connection string for user/password (sslmode=disable).
func (p *Postgres) DSNAs(user, password, dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(user, password),
		Host:     net.JoinHostPort(p.host, strconv.Itoa(p.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Connect opens a superuser connection to db, closed at the test's cleanup.
func (p *Postgres) Connect(t testing.TB, db string) *pgx.Conn {
	t.Helper()
	return p.ConnectAs(t, p.SuperUser, p.SuperPassword, db)
}

// ConnectAs opens a connection as user to db, closed at the test's cleanup.
func (p *Postgres) ConnectAs(t testing.TB, user, password, db string) *pgx.Conn {
	t.Helper()
	return p.connectWith(t, user, password, db, nil)
}

// connectWith opens a connection as user to db with settings in its startup packet, closed at
// the test's cleanup.
func (p *Postgres) connectWith(t testing.TB, user, password, db string, settings map[string]string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(p.DSNAs(user, password, db))
	if err != nil {
		t.Fatalf("testenv: parse the DSN of %s: %v", db, err)
	}
	for k, v := range settings {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testenv: connect to %s as %s on %s: %v", db, user, p.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// admin runs fn on a fresh superuser connection to the postgres database.
func (p *Postgres) admin(ctx context.Context, fn func(conn *pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return fn(conn)
}

// serverMajor asks the server for its major version.
func (p *Postgres) serverMajor(ctx context.Context) (major int, err error) {
	err = p.admin(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major)
	})
	return major, err
}

// CreateDatabase creates a database named after the test (plus a random suffix), owned by the
// superuser, and drops it WITH (FORCE) at the test's cleanup.
func (p *Postgres) CreateDatabase(t testing.TB) string {
	t.Helper()
	return p.CreateDatabaseOwnedBy(t, p.SuperUser)
}

// CreateDatabaseOwnedBy is CreateDatabase with another owner (a role of the test).
func (p *Postgres) CreateDatabaseOwnedBy(t testing.TB, owner string) string {
	t.Helper()
	name := uniqueName(t, "")
	ctx := context.Background()
	err := p.admin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" OWNER "+ident(owner))
		return err
	})
	if err != nil {
		t.Fatalf("testenv: create database %s on %s: %v", name, p.Name, err)
	}
	t.Cleanup(func() {
		if err := p.dropDatabases(context.Background(), name); err != nil {
			t.Errorf("testenv: drop database %s on %s: %v", name, p.Name, err)
		}
	})
	return name
}

// CreateRole creates a role with the given attributes (SQL, for example "LOGIN CREATEDB
// CREATEROLE") and a random password, named after the test plus a random suffix. At the test's
// cleanup the databases it owns are dropped, its objects and privileges elsewhere are dropped,
// and the role is dropped.
func (p *Postgres) CreateRole(t testing.TB, attrs string) (name, password string) {
	t.Helper()
	name, password = uniqueName(t, "r_"), randomHex(12)
	ctx := context.Background()
	err := p.admin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, fmt.Sprintf("CREATE ROLE %s WITH %s PASSWORD %s", ident(name),
			attrs, literal(password)))
		return err
	})
	if err != nil {
		t.Fatalf("testenv: create role %s (%s) on %s: %v", name, attrs, p.Name, err)
	}
	t.Cleanup(func() {
		if err := p.dropRoles(context.Background(), name); err != nil {
			t.Errorf("testenv: drop role %s on %s: %v", name, p.Name, err)
		}
	})
	return name, password
}

// CreateManagedAdmin creates the kind of admin a managed PostgreSQL service hands out: LOGIN
// CREATEDB CREATEROLE, not a superuser, no REPLICATION or BYPASSRLS. Dropped at cleanup.
func (p *Postgres) CreateManagedAdmin(t testing.TB) (name, password string) {
	t.Helper()
	return p.CreateRole(t, "LOGIN CREATEDB CREATEROLE NOSUPERUSER NOREPLICATION NOBYPASSRLS")
}

// DropRolesAtCleanup drops roles the code under test creates with names it chose (managed roles
// say), as CreateRole's cleanup does: their databases, their objects and privileges elsewhere,
// then the roles. Roles that do not exist by then are skipped.
func (p *Postgres) DropRolesAtCleanup(t testing.TB, roles ...string) {
	t.Cleanup(func() {
		if err := p.dropRoles(context.Background(), roles...); err != nil {
			t.Errorf("testenv: drop roles %v on %s: %v", roles, p.Name, err)
		}
	})
}

// DropRoles drops roles as DropRolesAtCleanup does, now (for a cleanup that finds the names when
// it runs). Roles that do not exist are skipped.
func (p *Postgres) DropRoles(ctx context.Context, roles ...string) error {
	return p.dropRoles(ctx, roles...)
}

// NamePrefix returns a random prefix ("p<8 hex>_") for the databases and roles the code under
// test creates. At the test's cleanup every database and role on this cluster whose name starts
// with it is dropped.
func (p *Postgres) NamePrefix(t testing.TB) string {
	t.Helper()
	prefix := "p" + randomHex(4) + "_"
	t.Cleanup(func() {
		if err := p.dropPrefixed(context.Background(), prefix); err != nil {
			t.Errorf("testenv: drop objects named %s* on %s: %v", prefix, p.Name, err)
		}
	})
	return prefix
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Restart restarts the server (fast shutdown, same port, same data). Local clusters only.
func (p *Postgres) Restart(ctx context.Context) error {
	if p.Cluster == nil {
		return fmt.Errorf("testenv: Restart is not supported for the Docker cluster %s", p.Name)
	}
	return p.Cluster.Restart(ctx)
}

// Crash SIGKILLs the server and every backend, then starts it again on the same port: it
// recovers from its WAL. Local clusters only.
func (p *Postgres) Crash(ctx context.Context) error {
	if p.Cluster == nil {
		return fmt.Errorf("testenv: Crash is not supported for the Docker cluster %s", p.Name)
	}
	return p.Cluster.Crash(ctx)
}
