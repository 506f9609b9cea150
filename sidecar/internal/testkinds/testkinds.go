// Package testkinds holds request kinds that exist only for the end-to-end tests. It is linked
// only into binaries built with the dataenv_testhooks tag (sidecar/internal/app/testhooks.go);
// tests register the kinds in dataenv.request_kinds themselves.
//
// Kind test_effects performs two side effects, each a row in dataenv_test.effects, with crash
// points before, between and after them. Each effect is check-then-act, as every real handler's
// steps are: after a crash and a rerun each effect exists exactly once. A handler that was not
// idempotent would leave two rows, and the tests count them.
//
// Kind test_lake_cleanup runs the lake side of a fork's cleanup on its own ({"fork": id}), so
// tests can drive it without the rest of drop_fork; its result reports the error, if any.
package testkinds

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/crashpoint"
	"github.com/dataenv/dataenv/sidecar/internal/lake"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Deps are the components the test kinds use.
type Deps struct {
	Pool  *pgxpool.Pool
	Lakes *lake.Hooks
}

// Register adds the test kinds.
func Register(reg *request.Registry, d Deps) {
	reg.Register("test_effects", &effects{pool: d.Pool})
	reg.Register("test_lake_cleanup", request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
		var args struct {
			Fork string `json:"fork"`
		}
		if err := request.DecodeArgs(req, &args); err != nil {
			return nil, err
		}
		err := d.Lakes.CleanupFork(ctx, args.Fork, rep)
		var ce *lake.CleanupError
		out := map[string]any{"ok": err == nil, "cleanup_error": errors.As(err, &ce), "blocks_create": err != nil && lake.BlocksCreate(err)}
		if err != nil {
			out["error"] = err.Error()
		}
		return out, nil
	}))
}

type effects struct{ pool *pgxpool.Pool }

const effectExistsSQL = `SELECT EXISTS (SELECT FROM dataenv_test.effects WHERE request_id = $1 AND effect = $2)`
const effectInsertSQL = `INSERT INTO dataenv_test.effects (request_id, effect, attempt) VALUES ($1, $2, $3)`

func (h *effects) Handle(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	crashpoint.HitOnce("test.before_effects")
	if err := h.effect(ctx, req, "one"); err != nil {
		return nil, err
	}
	request.Report(ctx, rep, "effect one", "done", "")
	crashpoint.HitOnce("test.between_effects")
	if err := h.effect(ctx, req, "two"); err != nil {
		return nil, err
	}
	request.Report(ctx, rep, "effect two", "done", "")
	crashpoint.HitOnce("test.after_effects")
	return map[string]any{"effects": 2, "attempt": req.Attempts}, nil
}

func (h *effects) effect(ctx context.Context, req *request.Request, name string) error {
	var done bool
	if err := h.pool.QueryRow(ctx, effectExistsSQL, req.ID, name).Scan(&done); err != nil {
		return fmt.Errorf("check effect %s: %w", name, err)
	}
	if done {
		return nil
	}
	if _, err := h.pool.Exec(ctx, effectInsertSQL, req.ID, name, req.Attempts); err != nil {
		return fmt.Errorf("effect %s: %w", name, err)
	}
	return nil
}
