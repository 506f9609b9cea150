package satellite

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// validated runs a satellite's request of a kind whose validation needs the control's state (the
// workspace exists, the lake is its own): the control's dataenv.validate_request checks it, as
// the control's insert trigger does for its own requests, before the handler runs, so a satellite
// request fails with the same text a control request is refused with.
type validated struct {
	control *pgxpool.Pool
	h       request.Handler
}

func (v validated) Handle(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
	args := string(req.Args)
	if args == "" {
		args = "{}"
	}
	_, err := v.control.Exec(ctx, `SELECT dataenv.validate_request($1, $2::jsonb)`, req.Kind, args)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && refusalCode(pgErr.Code):
		msg := pgErr.Message
		if pgErr.Hint != "" {
			msg += " (" + pgErr.Hint + ")"
		}
		request.Report(ctx, rep, "validation", "refused", msg)
		return nil, request.Refusef("%s", msg)
	case err != nil:
		return nil, request.Retryable(fmt.Errorf("%s: validate in the control installation: %w", req.Kind, err))
	}
	return v.h.Handle(ctx, req, rep)
}

// refusalCode: what a validator raises about the request itself (bad or unknown arguments, a
// missing workspace or lake, a refused right), never a fault worth another attempt.
func refusalCode(code string) bool {
	switch code {
	case "22023", "22004", "22P02", "42501", "P0001", "P0002", "23505", "23503":
		return true
	}
	return false
}
