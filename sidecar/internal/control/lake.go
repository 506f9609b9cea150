package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/objectstore"
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
	return collectLakes(rows)
}

// collectLakes reads the rows of lakesSQL (or of a query of the same columns).
func collectLakes(rows pgx.Rows) (map[string]map[string]Lake, error) {
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
	s, err := scanStorage(q.QueryRow(ctx, storageSQL, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("storage %q is not registered (SELECT name FROM dataenv.storage_info lists them)", name)
	}
	if err != nil {
		return s, fmt.Errorf("read storage %q: %w", name, err)
	}
	return s, nil
}

// scanStorage reads a row of storageSQL's columns.
func scanStorage(row pgx.Row) (Storage, error) {
	var s Storage
	var creds []byte
	if err := row.Scan(&s.Name, &s.URL, &creds); err != nil {
		return s, err
	}
	if err := json.Unmarshal(creds, &s.Creds); err != nil {
		return s, fmt.Errorf("storage %q: credentials: %w", s.Name, err)
	}
	return s, nil
}
