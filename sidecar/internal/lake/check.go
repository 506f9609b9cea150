package lake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// KindCheckLake is the check add_lake makes (dataenv.check_lake).
const KindCheckLake = "check_lake"

// CheckResult is the result of a check_lake request: what the lake's first job will find.
type CheckResult struct {
	Workspace      string `json:"workspace"`
	Lake           string `json:"lake"`
	Catalog        string `json:"catalog"` // cluster/database
	MetadataSchema string `json:"metadata_schema"`
	DataURL        string `json:"data_url"`
	// CatalogState: "new" (DuckLake creates its tables at the first job) or "this lake's" (a
	// DuckLake catalog with this lake's data path is there already).
	CatalogState string `json:"catalog_state"`
	StorageState string `json:"storage_state"`
}

// Register registers the handler of the check_lake request kind.
func (h *Hooks) Register(reg *request.Registry) {
	reg.Register(KindCheckLake, request.HandlerFunc(h.handleCheck))
}

// handleCheck connects to the lake's catalog and storage and says what to fix. It changes
// nothing and is never retried: a person acts on its error and checks again. (The kind is
// admin-only: its policy, which the registry checks before every attempt.)
func (h *Hooks) handleCheck(ctx context.Context, req *request.Request, _ request.Reporter) (any, error) {
	var args struct {
		Workspace string `json:"workspace"`
		Lake      string `json:"lake"`
	}
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	ns, err := h.checkedNamespace(ctx, args.Workspace, args.Lake)
	if err != nil {
		return nil, err
	}
	res := &CheckResult{Workspace: args.Workspace, Lake: args.Lake, Catalog: ns.Lake.CatalogCluster + "/" + ns.Lake.CatalogDatabase,
		MetadataSchema: ns.SchemaName(), DataURL: ns.DataURL()}
	if res.CatalogState, err = h.checkCatalog(ctx, ns); err != nil {
		return nil, err
	}
	if res.StorageState, err = checkStorage(ctx, ns); err != nil {
		return nil, err
	}
	return res, nil
}

// checkedNamespace is the namespace of the workspace's lake.
func (h *Hooks) checkedNamespace(ctx context.Context, workspace, name string) (Namespace, error) {
	ws, err := control.ReadWorkspace(ctx, h.pool, workspace)
	if err != nil {
		if errors.Is(err, control.ErrNotFound) {
			return Namespace{}, request.Refusef("check_lake: no workspace named %q", workspace)
		}
		return Namespace{}, request.Retryable(err)
	}
	lakes, err := control.ReadLakes(ctx, h.pool, []string{workspace}, name)
	if err != nil {
		return Namespace{}, request.Retryable(err)
	}
	l, ok := lakes[workspace][name]
	if !ok {
		return Namespace{}, request.Refusef("check_lake: workspace %q has no lake named %q", workspace, name)
	}
	s, err := control.ReadStorage(ctx, h.pool, l.Storage)
	if err != nil {
		return Namespace{}, request.Retryable(err)
	}
	return namespaceOf(ws.ID, ws.IsFork, l, s), nil
}

// checkCatalog connects to the catalog database and compares a DuckLake catalog already in the
// namespace's schema with the lake's data path. The metadata table is read only when it is a
// plain table, with row security off: nothing another role created runs as the admin.
func (h *Hooks) checkCatalog(ctx context.Context, ns Namespace) (string, error) {
	l := ns.Lake
	conn, err := h.clusters.Connect(ctx, l.CatalogCluster, l.CatalogDatabase)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "3D000" {
			return "", request.Refusef("check_lake: the catalog database %q does not exist on cluster %q. Create it with "+
				"SELECT dataenv.create_database(%s, %s), then SELECT dataenv.check_lake(%s, %s)", l.CatalogDatabase, l.CatalogCluster,
				Literal(l.CatalogCluster), Literal(l.CatalogDatabase), Literal(ns.Workspace), Literal(l.Name))
		}
		return "", request.Refusef("check_lake: cannot connect to the catalog database %q of cluster %q: %v (SELECT dataenv.check_cluster(%s) says more)",
			l.CatalogDatabase, l.CatalogCluster, err, Literal(l.CatalogCluster))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var kind string
	err = conn.QueryRow(ctx, `SELECT c.relkind::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'ducklake_metadata'`, ns.SchemaName()).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return "new", nil
	}
	if err != nil {
		return "", request.Retryable(fmt.Errorf("check_lake: read the catalog: %w", err))
	}
	if kind != "r" {
		return "", request.Refusef("check_lake: %s.ducklake_metadata in catalog %q is not a table: not a DuckLake catalog", ns.SchemaName(), l.CatalogDatabase)
	}
	return checkDataPath(ctx, conn, ns)
}

func checkDataPath(ctx context.Context, conn *pgx.Conn, ns Namespace) (string, error) {
	if _, err := conn.Exec(ctx, `SET row_security = off`); err != nil {
		return "", request.Retryable(err)
	}
	var path string
	err := conn.QueryRow(ctx, `SELECT value FROM `+pgx.Identifier{ns.SchemaName(), "ducklake_metadata"}.Sanitize()+
		` WHERE key OPERATOR(pg_catalog.=) 'data_path' AND scope IS NULL`).Scan(&path)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", request.Refusef("check_lake: read %s.ducklake_metadata in catalog %q: %v", ns.SchemaName(), ns.Lake.CatalogDatabase, err)
	}
	if strings.TrimSuffix(path, "/") == strings.TrimSuffix(ns.DataURL(), "/") {
		return "this lake's", nil
	}
	l := ns.Lake
	return "", request.Refusef("check_lake: catalog %q of cluster %q (schema %s) already holds a DuckLake lake whose data path is %s, "+
		"not this lake's %s: DuckLake keeps one lake per catalog schema and would refuse this one at its first job. "+
		"Remove it (SELECT dataenv.remove_lake(%s, %s)) and add it again with a catalog database of its own (dataenv.create_database) "+
		"or another METADATA_SCHEMA in extra_args", l.CatalogDatabase, l.CatalogCluster, ns.SchemaName(), path, ns.DataURL(),
		Literal(ns.Workspace), Literal(l.Name))
}

// checkStorage lists nothing but asks an S3 storage for a prefix that does not exist, which
// proves the bucket and the credentials; a local directory is created by the first job.
func checkStorage(ctx context.Context, ns Namespace) (string, error) {
	if !ns.Storage.IsS3() {
		dir := strings.TrimSuffix(ns.DataURL(), "/")
		if _, err := os.Stat(dir); err == nil {
			return "local directory " + dir + " exists", nil
		}
		return "local directory " + dir + " is created by the first job", nil
	}
	store, err := ns.Storage.Open()
	if err == nil {
		_, err = store.List(ctx, ns.DataPrefix+"__dataenv_check/")
	}
	if err != nil {
		return "", request.Refusef("check_lake: storage %q (%s) does not answer: %v. Fix it with SELECT dataenv.update_storage(%s, url) "+
			"or dataenv.update_storage_credentials(%s, ...), then SELECT dataenv.check_lake(%s, %s)", ns.Storage.Name, ns.Storage.URL,
			scrubCreds(err.Error(), ns.Storage.Creds.Secrets()), Literal(ns.Storage.Name), Literal(ns.Storage.Name), Literal(ns.Workspace), Literal(ns.Lake.Name))
	}
	return "bucket answers", nil
}

func scrubCreds(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "********")
		}
	}
	return s
}
