package localpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/procguard"
)

// Cluster is a running PostgreSQL cluster started (or, for a persistent one, found running) by
// Start. Stop it with Stop.
type Cluster struct {
	// SuperUser and SuperPassword log in over TCP (scram-sha-256) with every privilege.
	SuperUser     string
	SuperPassword string
	// Dir is the cluster's directory; DataDir (PGDATA), SocketDir and LogFile live in it
	// (SocketDir may live in the temporary directory when Dir's path is too long for a socket).
	Dir       string
	DataDir   string
	SocketDir string
	LogFile   string
	// Major is the server's major version.
	Major int
	// Root is the directory the server runs in, chrooted (Config.Root); empty for the
	// machine's own binaries. Dir, DataDir, SocketDir and LogFile are paths of this machine
	// (inside Root when it is set).
	Root string

	port       int
	persistent bool
	attached   bool
	binDir     string
	runAs      *runAs
	logger     *slog.Logger

	// Throwaway clusters: the postmaster is our child, in its own process group, and a guard
	// removes the group and Dir if this process dies without Stop.
	cmd    *exec.Cmd
	exited chan struct{}
	guard  *procguard.Guard

	stopOnce  sync.Once
	stopErr   error
	isStopped atomic.Bool
}

// Host is the address the server listens on.
func (c *Cluster) Host() string { return "127.0.0.1" }

// Port is the TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// Persistent reports whether Stop keeps the directory.
func (c *Cluster) Persistent() bool { return c.persistent }

// Attached reports whether Start found a persistent cluster's server already running and used
// it, rather than starting it: whoever started it is the one to stop it.
func (c *Cluster) Attached() bool { return c.attached }

// DSN is a URL connection string for the superuser over TCP (sslmode=disable).
func (c *Cluster) DSN(dbname string) string {
	return c.DSNAs(c.SuperUser, c.SuperPassword, dbname)
}

// DSNAs is a URL connection string for user/password over TCP (sslmode=disable).
func (c *Cluster) DSNAs(user, password, dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(user, password),
		Host:     net.JoinHostPort(c.Host(), strconv.Itoa(c.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Start starts a cluster as described by cfg. See Config.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	ra, err := resolveRunAs(cfg)
	if err != nil {
		return nil, err
	}
	binDir, major, err := ra.binDir(ctx, cfg.BinDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		SuperUser: DefaultSuperUser, Major: major, Root: ra.root, persistent: cfg.Persistent,
		binDir: binDir, runAs: ra, logger: cfg.logger().With("cluster", cfg.name()),
	}
	if cfg.Persistent {
		return c, c.startPersistent(ctx, cfg)
	}
	if err := c.startThrowaway(ctx, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) setDirs(dir string) {
	c.Dir = dir
	c.DataDir = filepath.Join(dir, "data")
	c.LogFile = filepath.Join(dir, "postgres.log")
	c.SocketDir = filepath.Join(dir, "sock")
}

// prepareDir creates dir (0700, owned by the run-as user) and the socket directory.
func (c *Cluster) prepareDir(dir string) error {
	// Missing parents are created enterable (0755): the run-as user must reach dir.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	if !c.runAs.within(dir) {
		return fmt.Errorf("localpg: %s is outside the root %s the server runs in: a cluster "+
			"directory must be inside it", dir, c.runAs.root)
	}
	if err := c.runAs.checkTraversable(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	c.setDirs(dir)
	// A unix socket path is limited to 107 bytes: fall back to a short directory under /tmp.
	if len(c.runAs.inner(c.SocketDir))+len("/.s.PGSQL.65535") > 100 {
		sock, err := os.MkdirTemp(c.runAs.tempParent(), "dataenv-pgsock-")
		if err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		c.SocketDir = sock
	} else if err := os.MkdirAll(c.SocketDir, 0o700); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	return c.runAs.chown(dir, c.SocketDir)
}

// initdb creates the data directory with the superuser and the cluster settings.
func (c *Cluster) initdb(ctx context.Context, cfg Config) error {
	c.SuperPassword = randomHex(16)
	pwFile := filepath.Join(c.Dir, ".pwfile")
	if err := os.WriteFile(pwFile, []byte(c.SuperPassword+"\n"), 0o600); err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	defer os.Remove(pwFile)
	if err := c.runAs.chown(pwFile); err != nil {
		return err
	}
	args := []string{"-D", c.inner(c.DataDir), "-U", c.SuperUser, "--pwfile=" + c.inner(pwFile),
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-instructions"}
	if !cfg.Persistent {
		args = append(args, "--no-sync")
	}
	if out, err := c.run(ctx, "initdb", args...); err != nil {
		return fmt.Errorf("localpg: initdb %s: %w\n%s", c.DataDir, err, out)
	}
	for name, content := range cfg.Files {
		p := filepath.Join(c.DataDir, filepath.Clean("/"+name))
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return fmt.Errorf("localpg: %w", err)
		}
		if err := c.runAs.chown(p); err != nil {
			return err
		}
	}
	var conf strings.Builder
	conf.WriteString("\n# added by dataenv localpg\n")
	for _, kv := range cfg.settings() {
		fmt.Fprintf(&conf, "%s = %s\n", kv[0], kv[1])
	}
	f, err := os.OpenFile(filepath.Join(c.DataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	_, err = f.WriteString(conf.String())
	return errors.Join(err, f.Close())
}

// inner is a path of this machine as the server sees it (see Config.Root).
func (c *Cluster) inner(p string) string { return c.runAs.inner(p) }

// run runs a PostgreSQL tool from binDir as the run-as user and returns its combined output.
func (c *Cluster) run(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := c.runAs.command(ctx, c.Dir, filepath.Join(c.binDir, tool), args...)
	cmd.WaitDelay = 10 * time.Second
	return cmd.CombinedOutput()
}

// waitReady connects as the superuser until the server answers, the process exits (exited is
// closed) or ctx ends.
func (c *Cluster) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		err := c.ping(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errServerExited
		case <-ctx.Done():
			return fmt.Errorf("localpg: server on port %d not ready: %w (last error: %v)\n%s",
				c.port, ctx.Err(), err, c.logTail(0))
		case <-tick.C:
		}
	}
}

var errServerExited = errors.New("localpg: server exited during startup")

func (c *Cluster) ping(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// logTail returns the server log from offset on (at most the last 4 KiB).
func (c *Cluster) logTail(offset int64) string {
	b, err := os.ReadFile(c.LogFile)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	b = b[offset:]
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bindFailure reports whether a server log says the port was taken.
func bindFailure(log string) bool {
	return strings.Contains(log, "Address already in use") ||
		strings.Contains(log, "could not create any TCP/IP sockets")
}

// signalGroup sends sig to the process group pgid, ignoring "no such process".
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
