package control

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// The rules for user-chosen names live in SQL, where the API functions and request validators
// apply them at call time. Handlers that put a name into DDL apply them again by calling the
// same functions: one rule, one message, no second copy in Go.

// CheckName applies dataenv.check_name to a name of a cluster, database or role (what); a name it
// refuses is a refusal with its message.
func CheckName(ctx context.Context, q Querier, what, name string) error {
	return rule(ctx, q, `SELECT dataenv.check_name($1, $2)`, what, name)
}

// CheckWorkspaceID applies dataenv.check_workspace_id; fn names the caller in the message.
func CheckWorkspaceID(ctx context.Context, q Querier, fn, id string) error {
	return rule(ctx, q, `SELECT dataenv.check_workspace_id($1, $2)`, fn, id)
}

func rule(ctx context.Context, q Querier, sql string, args ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code != "" && pgErr.Code[:2] == "22" {
		return request.Refusef("%s", pgErr.Message)
	}
	if err != nil {
		return request.Retryable(err)
	}
	return nil
}
