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
	// tools are the same secrets for a member's own DuckDB session (dataenv.duckdb_script): the
	// password is a placeholder that the SQL function fills in.
	tools     []string
	toolInfos []ToolSecret
	// certDirs hold root certificate files the runner must read (bound into a jail).
	certDirs []string
}

// catalogConn is how DuckDB reaches one catalog database.
type catalogConn struct {
	Path   string // libpq keywords without host, user or password
	Secret string // name of the temporary postgres secret with the credentials
	// ToolPath is Path for a member's own DuckDB session: no sslrootcert (a temporary file of the
	// sidecar's), application_name dataenv-tools.
	ToolPath string
	// DBTPath is ToolPath without quotes where libpq needs none (dbt-duckdb quotes the path
	// without escaping).
	DBTPath string
	// CertNote says that the cluster needs a root certificate the tools path does not name.
	CertNote bool
}

// ToolSecret is a postgres secret of a member's DuckDB session, as settings (a dbt profile):
// the password is filled in by dataenv.duckdb_settings.
type ToolSecret struct {
	Name     string `json:"name"`
	Cluster  string `json:"cluster"`
	Host     string `json:"host"`
	Port     string `json:"port"`
	User     string `json:"user"`
	Database string `json:"database"`
}

// PasswordPlaceholder is what dataenv.duckdb_script replaces with the password of the
// workspace's role on cluster.
func PasswordPlaceholder(cluster string) string { return "{{pg_password:" + cluster + "}}" }

// S3Placeholder is what dataenv.duckdb_script replaces with the key options of storage's secret.
func S3Placeholder(storage string) string { return "{{s3_credentials:" + storage + "}}" }

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
	if cc, ok := c.conns[clusterName+"\x00"+database]; ok {
		return cc, nil
	}
	lp, err := c.clusters.WorkspaceLibpq(ctx, clusterName, c.workspace, database)
	if err != nil {
		return catalogConn{}, fmt.Errorf("catalog database %q of cluster %q: %w", database, clusterName, err)
	}
	return c.ConnWith(ctx, clusterName, database, lp), nil
}

// Has reports whether the resolution has the connection of database on cluster already.
func (c *catalogs) Has(clusterName, database string) bool {
	_, ok := c.conns[clusterName+"\x00"+database]
	return ok
}

// ConnWith is Conn with the workspace role's libpq settings of the database already in hand
// (Access.GrantWithLibpq, for a database Has not); the catalogs close lp.
func (c *catalogs) ConnWith(ctx context.Context, clusterName, database string, lp *cluster.Libpq) catalogConn {
	key := clusterName + "\x00" + database
	c.libpqs = append(c.libpqs, lp)
	if cc, ok := c.conns[key]; ok {
		return cc
	}
	var path, toolPath, dbtPath, secret, toolSecret []string
	info := ToolSecret{Name: fmt.Sprintf("__dataenv_pg_%d", len(c.conns)+1), Cluster: clusterName}
	certNote := false
	for _, kv := range lp.Env {
		k, v, _ := strings.Cut(kv, "=")
		if v == "" {
			continue
		}
		if word, ok := pathKeys[k]; ok {
			path = append(path, word+"="+kvQuote(v))
			if k != "PGSSLROOTCERT" {
				toolPath = append(toolPath, word+"="+kvQuote(v))
				dbtPath = append(dbtPath, word+"="+kvBare(v))
			}
		}
		if k == "PGSSLROOTCERT" {
			c.certDirs = append(c.certDirs, filepath.Dir(v))
			certNote = true
		}
		switch k {
		case "PGHOST":
			info.Host = v
		case "PGPORT":
			info.Port = v
		case "PGUSER":
			info.User = v
		case "PGDATABASE":
			info.Database = v
		}
		if word, ok := secretKeys[k]; ok {
			switch k {
			case "PGPASSWORD":
				c.secrets = append(c.secrets, v, kvQuote(v), Literal(v))
				secret = append(secret, word+" "+Literal(v))
				toolSecret = append(toolSecret, word+" "+PasswordPlaceholder(clusterName))
			case "PGPORT":
				secret = append(secret, word+" "+v)
				toolSecret = append(toolSecret, word+" "+v)
			default:
				secret = append(secret, word+" "+Literal(v))
				toolSecret = append(toolSecret, word+" "+Literal(v))
			}
		}
	}
	if lp.ScramClientKey != "" {
		// libpq then uses the keys for SCRAM (the password stays for a server that asks for it
		// in clear): no key derivation in the job's attach.
		for _, k := range []string{lp.ScramClientKey, lp.ScramServerKey} {
			c.secrets = append(c.secrets, k, Literal(k))
		}
		secret = append(secret, "SCRAM_CLIENT_KEY "+Literal(lp.ScramClientKey), "SCRAM_SERVER_KEY "+Literal(lp.ScramServerKey))
	}
	// A job's catalog sessions carry its attempt's name, so a later attempt fences them too; the
	// tools' script and dbt profile are used outside any request.
	path = append(path, "application_name="+kvQuote(fence.AppName(ctx, "dataenv-job")))
	toolPath = append(toolPath, "application_name='dataenv-tools'")
	dbtPath = append(dbtPath, "application_name=dataenv-tools")
	cc := catalogConn{Path: strings.Join(path, " "), Secret: info.Name,
		ToolPath: strings.Join(toolPath, " "), DBTPath: strings.Join(dbtPath, " "), CertNote: certNote}
	c.toolInfos = append(c.toolInfos, info)
	c.setup = append(c.setup, fmt.Sprintf("CREATE OR REPLACE TEMPORARY SECRET %s (TYPE postgres, %s)", Ident(cc.Secret), strings.Join(secret, ", ")))
	c.tools = append(c.tools, fmt.Sprintf("CREATE OR REPLACE TEMPORARY SECRET %s (TYPE postgres, %s)", Ident(cc.Secret), strings.Join(toolSecret, ", ")))
	c.conns[key] = cc
	return cc
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

// kvBare is s as a libpq keyword value, unquoted when it needs no quotes.
func kvBare(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-/:", r)) {
			return kvQuote(s)
		}
	}
	if s == "" {
		return kvQuote(s)
	}
	return s
}

func kvQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
