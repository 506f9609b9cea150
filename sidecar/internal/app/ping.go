package app

import (
	"context"
	"time"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// pingHandler does nothing (optionally for sleep_ms): health checks and benchmarks. It is
// stateless: running it twice after a crash is harmless, so it is never claimed.
type pingHandler struct{}

func (pingHandler) Stateless() bool { return true }

func (pingHandler) Handle(ctx context.Context, req *request.Request, _ request.Reporter) (any, error) {
	var args struct {
		SleepMS int `json:"sleep_ms"`
	}
	if err := request.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.SleepMS > 0 {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(time.Duration(args.SleepMS) * time.Millisecond):
		}
	}
	return map[string]any{"pong": true}, nil
}
