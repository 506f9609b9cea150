package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/objectstore"
)

// Storage is a registered object-store root with its credentials (never printed).
type Storage struct {
	Name  string
	URL   string // no trailing slash
	Creds objectstore.Credentials
}

// IsS3 reports whether the storage is an S3 bucket.
func (s Storage) IsS3() bool { return strings.HasPrefix(s.URL, "s3://") }

// Open returns the storage's object store.
func (s Storage) Open() (objectstore.Store, error) { return objectstore.Open(s.URL, s.Creds) }

// Lake is one workspace's lake configuration row.
type Lake struct {
	Workspace       string
	Name            string
	CatalogCluster  string
	CatalogDatabase string
	Storage         string
	DataPath        string
	ExtraArgs       map[string]any
	ForkBehavior    string // "", isolated or shared
}

// Workspace is a workspace and its fork chain.
type Workspace struct {
	ID     string
	IsFork bool
	// Ancestors, nearest first. Empty for a root and for an orphaned fork.
	Ancestors []Ancestor
}

// Ancestor is one workspace of a fork chain.
type Ancestor struct {
	ID     string
	IsFork bool
}

// Orphaned reports whether the workspace is a fork whose parent is gone.
func (w Workspace) Orphaned() bool { return w.IsFork && len(w.Ancestors) == 0 }

// Querier is what config reads need (a pool, a connection or a transaction).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNoWorkspace is returned for a workspace that does not exist.
var ErrNoWorkspace = errors.New("no such workspace")

// workspaceSQL reads a workspace and its chain. The workspaces area owns the table
// (id, parent ON DELETE SET NULL, is_fork); this is the only query that reads it.
const workspaceSQL = `
WITH RECURSIVE chain(depth, id, parent, is_fork) AS (
    SELECT 0, w.id, w.parent, w.is_fork FROM dataenv.workspaces w WHERE w.id = $1
    UNION ALL
    SELECT c.depth + 1, w.id, w.parent, w.is_fork
      FROM chain c JOIN dataenv.workspaces w ON w.id = c.parent
     WHERE c.depth < 100
)
SELECT id, is_fork FROM chain ORDER BY depth`

// ReadWorkspace reads workspace id and its ancestors.
func ReadWorkspace(ctx context.Context, q Querier, id string) (*Workspace, error) {
	rows, err := q.Query(ctx, workspaceSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read workspace %q: %w", id, err)
	}
	chain, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Ancestor, error) {
		var a Ancestor
		return a, r.Scan(&a.ID, &a.IsFork)
	})
	if err != nil {
		return nil, fmt.Errorf("read workspace %q: %w", id, err)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("workspace %q: %w", id, ErrNoWorkspace)
	}
	return &Workspace{ID: id, IsFork: chain[0].IsFork, Ancestors: chain[1:]}, nil
}

const lakesSQL = `
SELECT workspace, name, catalog_cluster, catalog_database, storage, data_path, extra_args, coalesce(fork_behavior, '')
  FROM dataenv.lakes WHERE workspace = ANY($1) AND ($2 = '' OR name = $2)`

// ReadLakes reads the lakes of the workspaces (all lakes when name is empty), keyed by
// workspace then lake name.
func ReadLakes(ctx context.Context, q Querier, workspaces []string, name string) (map[string]map[string]Lake, error) {
	rows, err := q.Query(ctx, lakesSQL, workspaces, name)
	if err != nil {
		return nil, fmt.Errorf("read lakes: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lake, error) {
		var l Lake
		var extra []byte
		err := r.Scan(&l.Workspace, &l.Name, &l.CatalogCluster, &l.CatalogDatabase, &l.Storage, &l.DataPath, &extra, &l.ForkBehavior)
		if err == nil {
			err = json.Unmarshal(extra, &l.ExtraArgs)
		}
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read lakes: %w", err)
	}
	out := map[string]map[string]Lake{}
	for _, l := range list {
		if out[l.Workspace] == nil {
			out[l.Workspace] = map[string]Lake{}
		}
		out[l.Workspace][l.Name] = l
	}
	return out, nil
}

const storageSQL = `
SELECT s.name, s.url, coalesce(sec.credentials, '{}'::jsonb)
  FROM dataenv.storages s LEFT JOIN dataenv.storage_secrets sec ON sec.storage = s.name
 WHERE s.name = $1`

// ReadStorage reads a storage and its credentials (the sidecar's role only can).
func ReadStorage(ctx context.Context, q Querier, name string) (Storage, error) {
	var s Storage
	var creds []byte
	err := q.QueryRow(ctx, storageSQL, name).Scan(&s.Name, &s.URL, &creds)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("storage %q is not registered (SELECT name FROM dataenv.storage_info lists them)", name)
	}
	if err != nil {
		return s, fmt.Errorf("read storage %q: %w", name, err)
	}
	if err := json.Unmarshal(creds, &s.Creds); err != nil {
		return s, fmt.Errorf("storage %q: credentials: %w", name, err)
	}
	return s, nil
}

// extraOptions renders a lake's extra_args as ATTACH options, in name order, without the
// options named in drop.
func extraOptions(extra map[string]any, drop ...string) []Option {
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []Option
	for _, k := range names {
		out = append(out, Option{Name: k, Value: optionValue(extra[k])})
	}
	return withoutOptions(out, drop...)
}

func optionValue(v any) string {
	switch x := v.(type) {
	case string:
		return Literal(x)
	case bool:
		if x {
			return "TRUE"
		}
		return "FALSE"
	case float64:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%f", x), "0"), ".")
	default:
		b, _ := json.Marshal(x)
		return Literal(string(b))
	}
}

// stringArg returns extra_args[name] when it is a string.
func stringArg(extra map[string]any, name string) string {
	s, _ := extra[name].(string)
	return s
}
