package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/dataenv/dataenv/sidecar/request"
)

func pid() int { return os.Getpid() }

// registerBuiltins adds the kinds every sidecar serves.
func registerBuiltins(reg *request.Registry) {
	if _, ok := reg.Lookup("ping"); !ok {
		reg.Register("ping", pingHandler{})
	}
}

// pingHandler does nothing (optionally for sleep_ms): health checks and benchmarks.
type pingHandler struct{}

func (pingHandler) Stateless() bool { return true }

func (pingHandler) Handle(ctx context.Context, req *request.Request, _ request.Reporter) (any, error) {
	var args struct {
		SleepMS int `json:"sleep_ms"`
	}
	if len(req.Args) > 0 {
		if err := json.Unmarshal(req.Args, &args); err != nil {
			return nil, fmt.Errorf("ping: bad args: %w", err)
		}
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
