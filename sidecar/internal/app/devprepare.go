package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
)

// What dataenv dev prepares for the quickstart (examples/quickstart.sql): the built-in cluster
// set up, a storage under the instance's directory, and a database for lake catalogs on the
// built-in cluster.
const (
	DevStorage        = "local"
	DevCatalogCluster = "instance"
	DevCatalogDB      = "lake_catalog"
)

// devPrepared is what prepareDev found or made, for the banner.
type devPrepared struct {
	StorageURL string
}

// prepareDev makes the built-in cluster, storage and catalog database ready through the same
// requests a user would make, once the sidecar runs. Each step is skipped when already done, so
// a restart changes nothing.
func prepareDev(ctx context.Context, dsn, dir string, sidecarDone <-chan struct{}) (devPrepared, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return devPrepared{}, fmt.Errorf("prepare: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	p := devStep{ctx: ctx, conn: conn, sidecarDone: sidecarDone}
	var ready bool
	if err := conn.QueryRow(ctx, `SELECT ready FROM dataenv.cluster_info WHERE name = $1`, DevCatalogCluster).Scan(&ready); err != nil {
		return devPrepared{}, fmt.Errorf("prepare: read cluster %s: %w", DevCatalogCluster, err)
	}
	if !ready {
		if err := p.request(`SELECT dataenv.setup_cluster($1)`, DevCatalogCluster); err != nil {
			return devPrepared{}, err
		}
	}
	var managed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM dataenv.managed_database_list WHERE cluster = $1 AND name = $2)`,
		DevCatalogCluster, DevCatalogDB).Scan(&managed); err != nil {
		return devPrepared{}, fmt.Errorf("prepare: read managed databases: %w", err)
	}
	if !managed {
		if err := p.request(`SELECT dataenv.create_database($1, $2)`, DevCatalogCluster, DevCatalogDB); err != nil {
			return devPrepared{}, err
		}
	}
	url, err := devStorage(ctx, conn, dir)
	return devPrepared{StorageURL: url}, err
}

// devStorage registers storage "local" at <dir>/lake unless a storage of that name exists (its
// url is then reported as it is).
func devStorage(ctx context.Context, conn *pgx.Conn, dir string) (string, error) {
	var url string
	err := conn.QueryRow(ctx, `SELECT url FROM dataenv.storage_info WHERE name = $1`, DevStorage).Scan(&url)
	if err == nil {
		return url, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("prepare: read storages: %w", err)
	}
	lakeDir := filepath.Join(dir, "lake")
	if err := os.MkdirAll(lakeDir, 0o755); err != nil {
		return "", fmt.Errorf("prepare: %w", err)
	}
	url = "file://" + lakeDir
	if _, err := conn.Exec(ctx, `SELECT dataenv.add_storage($1, $2)`, DevStorage, url); err != nil {
		return "", fmt.Errorf("prepare: add storage %s at %s: %w", DevStorage, url, err)
	}
	return url, nil
}

// devStep makes requests on one connection and waits for them.
type devStep struct {
	ctx         context.Context
	conn        *pgx.Conn
	sidecarDone <-chan struct{} // closed when the sidecar stopped
}

// request runs sql (a request function returning the id), commits, and waits until the request
// succeeded; a failure, or the sidecar stopping meanwhile, is the error.
func (p devStep) request(sql string, args ...any) error {
	var id string
	if err := p.conn.QueryRow(p.ctx, sql+`::text`, args...).Scan(&id); err != nil {
		return fmt.Errorf("prepare: %s: %w", sql, err)
	}
	for {
		var status string
		var errText *string
		err := p.conn.QueryRow(p.ctx, `SELECT status, error FROM dataenv.wait($1::uuid, '2 s')`, id).Scan(&status, &errText)
		if err != nil {
			return fmt.Errorf("prepare: wait for %s: %w", sql, err)
		}
		switch status {
		case "succeeded":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("prepare: %s (request %s) %s: %s", sql, id, status, deref(errText))
		}
		select {
		case <-p.sidecarDone:
			return fmt.Errorf("prepare: the sidecar stopped before request %s finished", id)
		case <-p.ctx.Done():
			return p.ctx.Err()
		default:
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
