// Package testkinds registers request kinds that exist only for the crash-recovery tests, and
// only when the process runs with DATAENV_TEST_HOOKS=1.
//
// Kind test_effects performs two side effects, each a row in dataenv_test.effects, with crash
// points before, between and after them. Each effect is check-then-act, as every real handler's
// steps are: after a crash and a rerun each effect exists exactly once. A handler that was not
// idempotent would leave two rows, and the tests count them.
package testkinds

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/crashpoint"
	"github.com/dataenv/dataenv/sidecar/request"
)

// Register adds the test kinds when test hooks are enabled.
func Register(reg *request.Registry, pool *pgxpool.Pool) {
	if os.Getenv("DATAENV_TEST_HOOKS") != "1" {
		return
	}
	reg.Register("test_effects", &effects{pool: pool})
}

type effects struct{ pool *pgxpool.Pool }

const effectExistsSQL = `SELECT EXISTS (SELECT FROM dataenv_test.effects WHERE request_id = $1 AND effect = $2)`
const effectInsertSQL = `INSERT INTO dataenv_test.effects (request_id, effect, attempt) VALUES ($1, $2, $3)`

func (h *effects) Handle(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	crashpoint.HitOnce("test.before_effects")
	if err := h.effect(ctx, req, "one"); err != nil {
		return nil, err
	}
	rep.Step(ctx, request.Step{Name: "effect one", Status: "done"})
	crashpoint.HitOnce("test.between_effects")
	if err := h.effect(ctx, req, "two"); err != nil {
		return nil, err
	}
	rep.Step(ctx, request.Step{Name: "effect two", Status: "done"})
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
