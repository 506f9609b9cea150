package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
	"github.com/dataenv/dataenv/sidecar/request"
)

// inProcess runs request handlers in this process, as the dispatcher does, for requests made by
// the superuser: the fork and lake suites measure the handlers, not the request pipeline.
type inProcess struct {
	super string // superuser name, the requests' requested_by
	reg   *request.Registry
}

type discardSteps struct{}

func (discardSteps) Step(context.Context, request.Step) {}

// handle runs kind's handler on args and returns its result as JSON.
func (p *inProcess) handle(ctx context.Context, kind string, args map[string]any) (json.RawMessage, error) {
	h, ok := p.reg.Lookup(kind)
	if !ok {
		return nil, fmt.Errorf("no handler for %s", kind)
	}
	raw, _ := json.Marshal(args)
	res, err := h.Handle(ctx, &request.Request{ID: uuid.New(), Kind: kind, Args: raw, Status: request.Running,
		Attempts: 1, RequestedBy: p.super}, discardSteps{})
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// installedControl (re)creates database name in the bench cluster, installs dataenv there and
// returns its DSN and a pool on it.
func installedControl(ctx context.Context, env *Env, name string) (string, *pgxpool.Pool, error) {
	dsn, err := env.CreateDatabase(ctx, name)
	if err != nil {
		return "", nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := install.Install(ctx, conn, install.Options{Logger: quietLogger("install")}); err != nil {
		return "", nil, fmt.Errorf("install dataenv in %s: %w", name, err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	return dsn, pool, nil
}
