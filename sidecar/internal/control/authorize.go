package control

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Authorizer applies a request kind's policy to the role that made the request, with
// dataenv.authorize_request: the one implementation, which the insert trigger also runs, so the
// sidecar refuses exactly what the SQL API refuses, on every attempt, with the same text.
type Authorizer struct {
	Q Querier
}

// Authorize implements request.Authorizer: a policy refusal (42501) or a malformed workspace
// argument (22023) is a refusal; anything else (the control database unreachable) is an error
// worth another attempt.
func (a Authorizer) Authorize(ctx context.Context, req *request.Request) error {
	args := []byte(req.Args)
	if len(args) == 0 {
		args = []byte("{}")
	}
	rows, err := a.Q.Query(ctx, `SELECT dataenv.authorize_request($1, $2::jsonb, $3)`, req.Kind, string(args), req.RequestedBy)
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42501" || pgErr.Code == "22023") {
		if pgErr.Hint != "" {
			return request.Refusef("%s (%s)", pgErr.Message, pgErr.Hint)
		}
		return request.Refusef("%s", pgErr.Message)
	}
	return err
}
