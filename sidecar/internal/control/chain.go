package control

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Chain is a workspace with its fork chain, the lakes of every workspace of the chain, and the
// storages those lakes keep their files in: what a job's resolve reads before anything else.
type Chain struct {
	Workspace *Workspace
	// Lakes are keyed by workspace, then lake name (ReadLakes).
	Lakes map[string]map[string]Lake
	// Storages are keyed by name, with their credentials.
	Storages map[string]Storage
}

// Batcher is what ReadChain needs: a *pgx.Conn or a *pgxpool.Pool of the control database.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

const (
	chainLakesSQL = chainCTE + `
SELECT l.workspace, l.name, l.catalog_cluster, l.catalog_database, l.storage, l.data_path, l.extra_args, coalesce(l.fork_behavior, '')
  FROM dataenv.lakes l JOIN chain c ON c.id = l.workspace`
	chainStoragesSQL = chainCTE + `
SELECT s.name, s.url, coalesce(sec.credentials, '{}'::jsonb)
  FROM dataenv.storages s LEFT JOIN dataenv.storage_secrets sec ON sec.storage = s.name
 WHERE s.name IN (SELECT l.storage FROM dataenv.lakes l JOIN chain c ON c.id = l.workspace)`
)

// ReadChain reads workspace id with its chain, their lakes and those lakes' storages in one round
// trip (three statements, each with a snapshot of its own as in READ COMMITTED: what three
// separate reads would see). ErrNotFound if there is no such workspace.
func ReadChain(ctx context.Context, q Batcher, id string) (*Chain, error) {
	b := &pgx.Batch{}
	b.Queue(workspaceSQL, id)
	b.Queue(chainLakesSQL, id)
	b.Queue(chainStoragesSQL, id)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("read workspace %q: %w", id, err)
	}
	ws, err := collectWorkspace(rows, id)
	if err != nil {
		return nil, err
	}
	c := &Chain{Workspace: ws, Storages: map[string]Storage{}}
	if rows, err = br.Query(); err != nil {
		return nil, fmt.Errorf("read lakes: %w", err)
	}
	if c.Lakes, err = collectLakes(rows); err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, fmt.Errorf("read the storages of the lakes of workspace %q: %w", id, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Storage, error) { return scanStorage(r) })
	if err != nil {
		return nil, fmt.Errorf("read the storages of the lakes of workspace %q: %w", id, err)
	}
	for _, s := range list {
		c.Storages[s.Name] = s
	}
	return c, nil
}
