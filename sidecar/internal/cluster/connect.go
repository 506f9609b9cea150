package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

// maintenanceDatabase is the database external clusters are administered from.
const maintenanceDatabase = "postgres"

// connConfig builds the pgx configuration of a privileged (admin) connection to database of c
// ("" for the maintenance database). The instance cluster uses the control DSN.
func (a *Admin) connConfig(c *Cluster, database string) (*pgx.ConnConfig, error) {
	var cfg *pgx.ConnConfig
	var err error
	if c.Kind == KindInstance {
		cfg, err = pgx.ParseConfig(a.cfg.ControlDSN)
		if err != nil {
			return nil, fmt.Errorf("parse the control DSN: %w", scrub(err, a.controlPassword()))
		}
	} else {
		cfg, err = externalConfig(c)
		if err != nil {
			return nil, err
		}
	}
	if database != "" {
		cfg.Database = database
	}
	// The database's owner may have set session defaults (role among them) for every session.
	pgsession.Pin(cfg.RuntimeParams)
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "dataenv"
	}
	return cfg, nil
}

// externalConfig builds the configuration of an external cluster's admin connection. The
// password is set on the parsed config, never written into a connection string.
func externalConfig(c *Cluster) (*pgx.ConnConfig, error) {
	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=%s connect_timeout=10",
		kvQuote(c.Host), c.Port, kvQuote(c.AdminUser), kvQuote(maintenanceDatabase), effectiveSSLMode(c))
	cfg, err := pgx.ParseConfig(conninfo)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: connection settings: %w", c.Name, err)
	}
	cfg.Password = c.adminPassword
	if c.RootCertificatePEM != "" {
		if err := addRootCertificate(cfg, c.RootCertificatePEM); err != nil {
			return nil, fmt.Errorf("cluster %q: root_certificate_pem: %w", c.Name, err)
		}
	}
	return cfg, nil
}

// effectiveSSLMode is the cluster's sslmode, except that require with a root certificate
// verifies the chain (verify-ca), as libpq does when a root certificate file is present; pgx
// connections and libpq tools then behave the same.
func effectiveSSLMode(c *Cluster) string {
	if c.SSLMode == "require" && c.RootCertificatePEM != "" {
		return "verify-ca"
	}
	return c.SSLMode
}

// addRootCertificate trusts the system roots plus pem on every TLS configuration of cfg.
func addRootCertificate(cfg *pgx.ConnConfig, pem string) error {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM([]byte(pem)) {
		return errors.New("no certificate could be parsed")
	}
	if cfg.TLSConfig != nil {
		cfg.TLSConfig.RootCAs = pool
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig != nil {
			fb.TLSConfig.RootCAs = pool
		}
	}
	return nil
}

// connect opens a privileged connection to database of c.
func (a *Admin) connect(ctx context.Context, c *Cluster, database string) (*pgx.Conn, error) {
	cfg, err := a.connConfig(c, database)
	if err != nil {
		return nil, err
	}
	return a.connectWith(ctx, c, cfg)
}

// connectWith opens the admin connection cfg (connConfig's, perhaps changed) to cluster c.
func (a *Admin) connectWith(ctx context.Context, c *Cluster, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	nameSession(ctx, cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		err = fmt.Errorf("connect to database %q of cluster %q as %q: %w", cfg.Database, c.Name, cfg.User,
			scrub(err, cfg.Password))
		if retryableConnectError(err) {
			return nil, retryable(err)
		}
		return nil, err
	}
	return conn, nil
}

// retryableConnectError: authentication and authorization failures (class 28), unknown
// databases (3D000) and bad settings will not fix themselves; network errors may.
func retryableConnectError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return !strings.HasPrefix(pgErr.Code, "28") && pgErr.Code != "3D000" && pgErr.Code != "42501"
	}
	return true
}

// kvQuote quotes a keyword/value connection string value.
func kvQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

var kvSSLMode = regexp.MustCompile(`(?:^|\s)sslmode\s*=\s*'?([a-z-]+)`)

// dsnSSLMode extracts sslmode from a DSN (URL or keyword/value); libpq's default is prefer.
func dsnSSLMode(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			if m := u.Query().Get("sslmode"); m != "" {
				return m
			}
		}
		return "prefer"
	}
	if m := kvSSLMode.FindStringSubmatch(dsn); m != nil {
		return m[1]
	}
	return "prefer"
}

func portString(p uint16) string { return strconv.Itoa(int(p)) }
