package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Kinds of cluster.
const (
	KindInstance = "instance" // the control database's own cluster, reached with the control DSN
	KindExternal = "external" // a cluster registered with dataenv.register_cluster
)

// Cluster is a cluster's configuration as read from the control database under its lifecycle
// lock. Its secrets are unexported and never printed: String, GoString and LogValue leave them out.
type Cluster struct {
	Name               string
	Kind               string
	Host               string
	Port               int
	AdminUser          string // empty for the instance cluster
	SSLMode            string
	RootCertificatePEM string
	AppRole            string
	ReplicationRole    string
	SetUpFor           string // host:port of the last successful setup, "" if none

	adminPassword string
}

const readClusterSQL = `
SELECT c.name, c.kind, c.host, c.port, coalesce(c.admin_user, ''), c.sslmode,
       coalesce(c.root_certificate_pem, ''), c.app_role, c.replication_role, coalesce(c.set_up_for, ''),
       coalesce(s.admin_password, '')
  FROM dataenv.clusters c
  LEFT JOIN dataenv.cluster_secrets s ON s.cluster = c.name
 WHERE c.name = $1`

// ErrNoCluster is returned for a cluster name that is not registered.
var ErrNoCluster = errors.New("no such cluster")

// readCluster reads the configuration and admin secret of cluster from the control database.
func readCluster(ctx context.Context, control *pgx.Conn, name string) (*Cluster, error) {
	return scanCluster(control.QueryRow(ctx, readClusterSQL, name), name)
}

// scanCluster reads readClusterSQL's row for cluster name.
func scanCluster(row pgx.Row, name string) (*Cluster, error) {
	var c Cluster
	err := row.Scan(&c.Name, &c.Kind, &c.Host, &c.Port, &c.AdminUser,
		&c.SSLMode, &c.RootCertificatePEM, &c.AppRole, &c.ReplicationRole, &c.SetUpFor, &c.adminPassword)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("cluster %q: %w (SELECT name FROM dataenv.cluster_info lists them)", name, ErrNoCluster)
	}
	if err != nil {
		return nil, fmt.Errorf("read the configuration of cluster %q: %w", name, err)
	}
	return &c, nil
}

// HostPort is the cluster's current host:port, the value setup records in set_up_for.
func (c Cluster) HostPort() string { return c.Host + ":" + strconv.Itoa(c.Port) }

// Ready reports whether the last successful setup was for the cluster's current host:port.
func (c Cluster) Ready() bool { return c.SetUpFor != "" && c.SetUpFor == c.HostPort() }

// checkReady refuses work that needs a set-up cluster.
func (c Cluster) checkReady() error {
	if c.Ready() {
		return nil
	}
	was := c.SetUpFor
	if was == "" {
		was = "nothing yet"
	}
	return fmt.Errorf("cluster %q is not set up for %s (set up for %s): run SELECT dataenv.setup_cluster(%s) and wait for it to succeed",
		c.Name, c.HostPort(), was, quoteLiteral(c.Name))
}

// secrets lists the cluster's secrets, for scrubbing error texts.
func (c Cluster) secrets() []string { return []string{c.adminPassword} }

// String describes the cluster without secrets.
func (c Cluster) String() string {
	return fmt.Sprintf("cluster %s (%s %s, admin %q, sslmode %s)", c.Name, c.Kind, c.HostPort(), c.AdminUser, c.SSLMode)
}

// GoString is String: %#v must not print the secret either.
func (c Cluster) GoString() string { return c.String() }

// LogValue logs the cluster without secrets.
func (c Cluster) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", c.Name), slog.String("kind", c.Kind),
		slog.String("host_port", c.HostPort()), slog.String("sslmode", c.SSLMode))
}

func quoteLiteral(s string) string {
	out := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(append(out, '\''))
}
