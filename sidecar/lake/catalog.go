package lake

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/cluster"
	"github.com/dataenv/dataenv/sidecar/request"
)

// Clusters is the part of the cluster admin (sidecar/cluster) the lake code uses: the libpq
// settings of a catalog database for DuckDB, admin connections, and the lifecycle lock.
type Clusters interface {
	Libpq(ctx context.Context, cluster, database string) (*cluster.Libpq, error)
	Connect(ctx context.Context, cluster, database string) (*pgx.Conn, error)
	WithLifecycleLock(ctx context.Context, cluster string, rep request.Reporter,
		fn func(ctx context.Context, l *cluster.Locked) error) error
}

// catalogs hands out the DuckDB connection strings of catalog databases during one job's
// resolution, and remembers the secrets to scrub and the files to remove afterwards.
type catalogs struct {
	clusters Clusters
	conninfo map[string]string
	libpqs   []*cluster.Libpq
	secrets  []string
}

func newCatalogs(c Clusters) *catalogs {
	return &catalogs{clusters: c, conninfo: map[string]string{}}
}

// libpqKeys maps the libpq environment to connection-string keywords.
var libpqKeys = map[string]string{
	"PGHOST": "host", "PGPORT": "port", "PGUSER": "user", "PGDATABASE": "dbname", "PGPASSWORD": "password",
	"PGSSLMODE": "sslmode", "PGSSLROOTCERT": "sslrootcert", "PGCONNECT_TIMEOUT": "connect_timeout",
}

// Conninfo is the libpq connection string of database on cluster (TLS settings included).
func (c *catalogs) Conninfo(ctx context.Context, clusterName, database string) (string, error) {
	key := clusterName + "\x00" + database
	if s, ok := c.conninfo[key]; ok {
		return s, nil
	}
	lp, err := c.clusters.Libpq(ctx, clusterName, database)
	if err != nil {
		return "", fmt.Errorf("catalog database %q of cluster %q: %w", database, clusterName, err)
	}
	c.libpqs = append(c.libpqs, lp)
	var parts []string
	for _, kv := range lp.Env {
		k, v, _ := strings.Cut(kv, "=")
		word, ok := libpqKeys[k]
		if !ok || v == "" {
			continue
		}
		if k == "PGPASSWORD" {
			c.secrets = append(c.secrets, v, kvQuote(v))
		}
		parts = append(parts, word+"="+kvQuote(v))
	}
	parts = append(parts, "application_name='dataenv-job'")
	s := strings.Join(parts, " ")
	c.conninfo[key] = s
	return s, nil
}

// Close removes the temporary root certificate files.
func (c *catalogs) Close() {
	for _, lp := range c.libpqs {
		_ = lp.Close()
	}
	c.libpqs = nil
}

func kvQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
