package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/dispatch"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// stepNames reads the names of request id's steps, in order.
func stepNames(ctx context.Context, pool *pgxpool.Pool, id uuid.UUID) ([]string, error) {
	var raw []byte
	if err := pool.QueryRow(ctx, `SELECT steps FROM dataenv.requests WHERE id = $1`, id).Scan(&raw); err != nil {
		return nil, err
	}
	var ss []request.Step
	if err := json.Unmarshal(raw, &ss); err != nil {
		return nil, err
	}
	names := []string{}
	for _, s := range ss {
		names = append(names, s.Name)
	}
	return names, nil
}

// TestHeldStepsAreWrittenWithTheOutcome: a step held by a handler that ends soon is not written
// on its own (the row shows no step while the handler runs) and is in the outcome's write; one
// held longer than a short while is written while the handler runs, once; a step reported after
// a held one writes it first, so the order holds; with every step held (request.Holding), each
// batch is written a short while after it is held, not only the first.
func TestHeldStepsAreWrittenWithTheOutcome(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	during := map[string][]string{} // the steps each kind's handler saw on its row
	saw := func(ctx context.Context, pool *pgxpool.Pool, kind string, id uuid.UUID) ([]string, error) {
		names, err := stepNames(ctx, pool, id)
		mu.Lock()
		during[kind] = names
		mu.Unlock()
		return names, err
	}
	ok := map[string]bool{"ok": true}
	f := newFixture(t, func(cfg *dispatch.Config) {
		pool := cfg.Pool
		cfg.Registry.Register("test_hold_short", request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
			request.ReportHeld(ctx, rep, "resolve", "done", "")
			_, err := saw(ctx, pool, req.Kind, req.ID)
			return ok, err
		}))
		cfg.Registry.Register("test_hold_long", request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
			request.ReportHeld(ctx, rep, "resolve", "done", "")
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if names, err := saw(ctx, pool, req.Kind, req.ID); err != nil || len(names) > 0 {
					return ok, err
				}
			}
			return nil, errors.New("the held step was never written while the handler ran")
		}))
		cfg.Registry.Register("test_hold_again", request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
			rep = request.Holding(rep) // every step held: each batch is written a short while later
			for i, step := range []string{"a", "b"} {
				request.Report(ctx, rep, step, "done", "")
				for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					names, err := saw(ctx, pool, req.Kind, req.ID)
					if err != nil || len(names) == i+1 {
						break
					}
					if time.Now().After(deadline) {
						return nil, fmt.Errorf("held step %q was never written while the handler ran (written: %q)", step, names)
					}
				}
			}
			return ok, nil
		}))
		cfg.Registry.Register("test_hold_order", request.HandlerFunc(func(ctx context.Context, req *request.Request, rep request.Reporter) (any, error) {
			request.ReportHeld(ctx, rep, "a", "done", "")
			request.Report(ctx, rep, "b", "done", "")
			_, err := saw(ctx, pool, req.Kind, req.ID)
			request.ReportHeld(ctx, rep, "c", "done", "")
			return ok, err
		}))
	})
	cases := []struct {
		kind              string
		whileRunning, end []string
	}{
		{"test_hold_short", []string{}, []string{"resolve"}},
		{"test_hold_long", []string{"resolve"}, []string{"resolve"}},
		{"test_hold_order", []string{"a", "b"}, []string{"a", "b", "c"}},
		{"test_hold_again", []string{"a", "b"}, []string{"a", "b"}},
	}
	for _, c := range cases {
		r, xact := f.insert(c.kind)
		f.deliver(tx(r, xact))
		if ev := f.await("written", f.sig.Written, r.ID); ev.Status != request.Succeeded {
			t.Fatalf("%s: outcome %s (%+v)", c.kind, ev.Status, f.row(r.ID))
		}
		mu.Lock()
		got := during[c.kind]
		mu.Unlock()
		if !slices.Equal(got, c.whileRunning) {
			t.Errorf("%s: steps while the handler ran %q, want %q", c.kind, got, c.whileRunning)
		}
		end, err := stepNames(f.ctx, f.pool, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(end, c.end) {
			t.Errorf("%s: steps after the outcome %q, want %q", c.kind, end, c.end)
		}
	}
}
