package control_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/tests/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	testenv.Main(m, func(ctx context.Context) error {
		var err error
		pg, err = testenv.StartPostgres(ctx, testenv.PGOptions{Name: "control"})
		return err
	})
}

// ReadChain gives what the separate reads give: the workspace with its ancestors nearest first,
// the lakes of every workspace of the chain and of no other, and exactly the storages those lakes
// use, with their credentials.
func TestReadChainReadsTheChainItsLakesAndTheirStorages(t *testing.T) {
	ctx := context.Background()
	db := pg.CreateDatabase(t)
	conn := pg.Connect(t, db)
	if _, err := install.Install(ctx, conn, install.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var cluster string
	if err := conn.QueryRow(ctx, `SELECT name FROM dataenv.clusters LIMIT 1`).Scan(&cluster); err != nil {
		t.Fatal(err)
	}
	testenv.MustExec(t, conn, `INSERT INTO dataenv.storages (name, url) VALUES ('rootstore', 'file:///tmp/r'), ('forkstore', 's3://b/f'), ('other', 'file:///tmp/o')`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.storage_secrets (storage, credentials) VALUES ('forkstore', '{"access_key_id": "k", "secret_access_key": "s"}')`)
	testenv.MustExec(t, conn, `INSERT INTO dataenv.workspaces (id) VALUES ('prod'), ('elsewhere')`)
	for _, w := range [][2]string{{"prod/a", "prod"}, {"prod/a/b", "prod/a"}} {
		testenv.MustExec(t, conn, `INSERT INTO dataenv.workspaces (id, is_fork, parent, created_by_request) VALUES ($1, true, $2, $3)`, w[0], w[1], uuid.New())
	}
	for _, l := range [][3]string{{"prod", "main", "rootstore"}, {"prod/a", "main", "forkstore"}, {"prod/a", "side", "rootstore"}, {"elsewhere", "main", "other"}} {
		testenv.MustExec(t, conn, `INSERT INTO dataenv.lakes (workspace, name, catalog_cluster, catalog_database, storage, data_path)
			VALUES ($1, $2, $3, 'cat', $4, 'p')`, l[0], l[1], cluster, l[2])
	}

	c, err := control.ReadChain(ctx, pool, "prod/a/b")
	if err != nil {
		t.Fatal(err)
	}
	ws := c.Workspace
	if ws.ID != "prod/a/b" || !ws.IsFork || ws.Parent != "prod/a" || len(ws.Ancestors) != 2 ||
		ws.Ancestors[0] != (control.Ancestor{ID: "prod/a", IsFork: true}) || ws.Ancestors[1] != (control.Ancestor{ID: "prod"}) {
		t.Fatalf("workspace %+v", ws)
	}
	if len(c.Lakes) != 2 || len(c.Lakes["prod"]) != 1 || len(c.Lakes["prod/a"]) != 2 || c.Lakes["prod/a"]["main"].Storage != "forkstore" {
		t.Fatalf("lakes %+v: want prod's main and prod/a's main and side", c.Lakes)
	}
	if len(c.Storages) != 2 || c.Storages["forkstore"].Creds.SecretAccessKey != "s" || c.Storages["rootstore"].URL != "file:///tmp/r" {
		t.Fatalf("storages: %d (%v, %v), want rootstore and forkstore with its credentials", len(c.Storages),
			c.Storages["rootstore"].URL, c.Storages["forkstore"].URL)
	}
	if _, err := control.ReadChain(ctx, pool, "nope"); err == nil || !errors.Is(err, control.ErrNotFound) {
		t.Fatalf("a workspace that does not exist: %v, want ErrNotFound", err)
	}
}
