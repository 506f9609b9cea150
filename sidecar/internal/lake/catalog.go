package lake

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/fence"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Clusters is the part of the cluster admin (sidecar/cluster) the lake code uses: connections
// and libpq settings as a workspace's role (what jobs and every read of a lake's tables use), a
// datatable's grants, admin connections (catalog queries and DDL dataenv owns only) and the
// lifecycle lock.
type Clusters interface {
	ConnectWorkspace(ctx context.Context, cluster, workspace, database string) (*pgx.Conn, error)
	WorkspaceLibpq(ctx context.Context, cluster, workspace, database string) (*cluster.Libpq, error)
	GrantDatatable(ctx context.Context, cluster, workspace, database string) error
	Connect(ctx context.Context, cluster, database string) (*pgx.Conn, error)
	WithLifecycleLock(ctx context.Context, cluster string, rep request.Reporter,
		fn func(ctx context.Context, l *cluster.Locked) error) error
}

// catalogs hands out the DuckDB connection of catalog and datatable databases during one job's
// resolution, as the job's workspace role: a libpq string without credentials for the ATTACH
// path (what duckdb_databases() shows) and a temporary DuckDB postgres secret holding host, port,
// user and password, dropped once the attaches are done (the attached databases keep their
// connections; the job's own SQL never sees the secret). It remembers the secrets to scrub and
// the files to remove afterwards.
type catalogs struct {
	clusters  Clusters
	workspace string
	conns     map[string]catalogConn
	libpqs    []*cluster.Libpq
	secrets   []string
	setup     []string
	// certDirs hold root certificate files the runner must read (bound into a jail).
	certDirs []string
}

// catalogConn is how DuckDB reaches one catalog database.
type catalogConn struct {
	Path   string // libpq keywords without host, user or password
	Secret string // name of the temporary postgres secret with the credentials
}

func newCatalogs(c Clusters, workspace string) *catalogs {
	return &catalogs{clusters: c, workspace: workspace, conns: map[string]catalogConn{}}
}

// pathKeys are the libpq settings that go into the ATTACH path; secretKeys go into the secret.
var (
	pathKeys   = map[string]string{"PGDATABASE": "dbname", "PGSSLMODE": "sslmode", "PGSSLROOTCERT": "sslrootcert", "PGCONNECT_TIMEOUT": "connect_timeout"}
	secretKeys = map[string]string{"PGHOST": "HOST", "PGPORT": "PORT", "PGUSER": "USER", "PGPASSWORD": "PASSWORD", "PGDATABASE": "DATABASE"}
)

// Conn returns how DuckDB reaches database on cluster as the workspace role (TLS settings
// included), creating its secret statement on first use.
func (c *catalogs) Conn(ctx context.Context, clusterName, database string) (catalogConn, error) {
	key := clusterName + "\x00" + database
	if cc, ok := c.conns[key]; ok {
		return cc, nil
	}
	lp, err := c.clusters.WorkspaceLibpq(ctx, clusterName, c.workspace, database)
	if err != nil {
		return catalogConn{}, fmt.Errorf("catalog database %q of cluster %q: %w", database, clusterName, err)
	}
	c.libpqs = append(c.libpqs, lp)
	var path, secret []string
	for _, kv := range lp.Env {
		k, v, _ := strings.Cut(kv, "=")
		if v == "" {
			continue
		}
		if word, ok := pathKeys[k]; ok {
			path = append(path, word+"="+kvQuote(v))
		}
		if k == "PGSSLROOTCERT" {
			c.certDirs = append(c.certDirs, filepath.Dir(v))
		}
		if word, ok := secretKeys[k]; ok {
			if k == "PGPASSWORD" {
				c.secrets = append(c.secrets, v, kvQuote(v), Literal(v))
			}
			if k == "PGPORT" {
				secret = append(secret, word+" "+v)
			} else {
				secret = append(secret, word+" "+Literal(v))
			}
		}
	}
	// A job's catalog sessions carry its attempt's name, so a later attempt fences them too.
	path = append(path, "application_name="+kvQuote(fence.AppName(ctx, "dataenv-job")))
	cc := catalogConn{Path: strings.Join(path, " "), Secret: fmt.Sprintf("__dataenv_pg_%d", len(c.conns)+1)}
	c.setup = append(c.setup, fmt.Sprintf("CREATE OR REPLACE TEMPORARY SECRET %s (TYPE postgres, %s)", Ident(cc.Secret), strings.Join(secret, ", ")))
	c.conns[key] = cc
	return cc, nil
}

// drops are the statements that remove the postgres secrets once the attaches are done.
func (c *catalogs) drops() []string {
	out := make([]string, 0, len(c.conns))
	for i := range len(c.conns) {
		out = append(out, "DROP TEMPORARY SECRET IF EXISTS "+Ident(fmt.Sprintf("__dataenv_pg_%d", i+1)))
	}
	return out
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
