package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

// Libpq is how a libpq tool (pg_dump, psql, pg_restore) reaches a cluster as its admin: the
// settings are environment variables of the child process only, never command-line arguments
// (which other users can read in ps) and never the sidecar's own environment.
//
//	lp, err := locked.Libpq("mydb")
//	defer lp.Close()
//	cmd := exec.CommandContext(ctx, "pg_dump", "--schema-only")
//	cmd.Env = lp.Environ()
//
// Set: PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE, PGSSLROOTCERT (a 0600 file in a
// private temporary directory holding the system roots plus the cluster's root_certificate_pem,
// removed by Close), PGOPTIONS (the session settings of package pgsession pinned), PGAPPNAME and
// PGCONNECT_TIMEOUT. Every other PG* variable of the sidecar's environment is dropped.
type Libpq struct {
	// Env holds the PG* variables (including PGPASSWORD: never log it).
	Env []string
	// ScramClientKey and ScramServerKey (base64), when set, are the SCRAM keys of PGPASSWORD's
	// verifier (ScramKeys): a client given them (libpq 18's scram_client_key and
	// scram_server_key; DuckDB's postgres secrets take them) authenticates without the 4,096
	// rounds of key derivation a password costs at every connection. libpq has no environment
	// variable for them, so tools run with Env derive as usual. Never log them.
	ScramClientKey, ScramServerKey string
	dir                            string
}

// systemRootFiles are where Linux distributions keep the system CA bundle.
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// libpq builds the environment for database of c; app is PGAPPNAME.
func (a *Admin) libpq(c *Cluster, database, app string) (*Libpq, error) {
	cfg, err := a.connConfig(c, database)
	if err != nil {
		return nil, err
	}
	return a.libpqFor(c, cfg, app)
}

// libpqFor builds the environment of the connection cfg (a connConfig of c, possibly with another
// user and password); app is PGAPPNAME.
func (a *Admin) libpqFor(c *Cluster, cfg *pgx.ConnConfig, app string) (*Libpq, error) {
	sslmode := effectiveSSLMode(c)
	if c.Kind == KindInstance {
		sslmode = dsnSSLMode(a.cfg.ControlDSN)
	}
	lp := &Libpq{Env: []string{
		"PGHOST=" + cfg.Host,
		"PGPORT=" + portString(cfg.Port),
		"PGUSER=" + cfg.User,
		"PGDATABASE=" + cfg.Database,
		"PGPASSWORD=" + cfg.Password,
		"PGSSLMODE=" + sslmode,
		"PGOPTIONS=" + pgsession.Options(),
		"PGAPPNAME=" + app,
		"PGCONNECT_TIMEOUT=10",
	}}
	if c.Kind == KindExternal && c.RootCertificatePEM != "" {
		if err := lp.writeRootCert(c.RootCertificatePEM); err != nil {
			return nil, fmt.Errorf("cluster %q: write the root certificate for libpq: %w", c.Name, err)
		}
	}
	return lp, nil
}

// Libpq returns the libpq environment of database of cluster, reading the configuration under
// the cluster's lifecycle lock (released on return). Close it when the child has exited.
func (a *Admin) Libpq(ctx context.Context, cluster, database string) (*Libpq, error) {
	var lp *Libpq
	err := a.WithLifecycleLock(ctx, cluster, nil, func(ctx context.Context, l *Locked) error {
		if err := a.fenceForLibpq(ctx, l); err != nil {
			return err
		}
		var err error
		lp, err = l.Libpq(database)
		return err
	})
	return lp, err
}

func (lp *Libpq) writeRootCert(pem string) error {
	dir, err := os.MkdirTemp("", "dataenv-sslroot-")
	if err != nil {
		return err
	}
	lp.dir = dir
	var bundle []byte
	for _, f := range systemRootFiles {
		if b, err := os.ReadFile(f); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	bundle = append(bundle, pem...)
	path := filepath.Join(dir, "root.crt")
	if err := os.WriteFile(path, bundle, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	lp.Env = append(lp.Env, "PGSSLROOTCERT="+path)
	return nil
}

// Environ is the environment of a child process: the sidecar's own without any PG* variable,
// plus Env.
func (lp *Libpq) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			out = append(out, kv)
		}
	}
	return append(out, lp.Env...)
}

// Close removes the temporary root certificate file, if any.
func (lp *Libpq) Close() error {
	if lp == nil || lp.dir == "" {
		return nil
	}
	dir := lp.dir
	lp.dir = ""
	return os.RemoveAll(dir)
}
