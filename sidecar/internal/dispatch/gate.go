package dispatch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

// gate holds one advisory lock per in-flight request on a connection of its own, from shortly
// after the request is decoded until its outcome is committed, so that dataenv.wait() can block on
// it instead of polling. A request is gated only once it has been in flight for gateDelay: most
// requests finish sooner, and a waiter's backoff re-check (1 ms doubling) finds them finished
// without the two lock round trips. Locks are only tried, never waited for, and capped in number:
// past the cap, or while the connection is down, waiters fall back to their backoff re-check.
// Losing the connection releases every gate at once, which only wakes waiters early.
type gate struct {
	dsn     string
	appName string
	log     *slog.Logger
	limit   int

	mu     sync.Mutex
	toLock map[uuid.UUID]time.Time // when the request was admitted
	toFree map[uuid.UUID]bool
	held   map[uuid.UUID]bool
	wake   chan struct{}
	timer  *time.Timer
}

// gateDelay is how long a request runs before it is gated.
const gateDelay = 10 * time.Millisecond

func newGate(dsn, appName string, limit int, log *slog.Logger) *gate {
	g := &gate{dsn: dsn, appName: appName, log: log, limit: limit, toLock: map[uuid.UUID]time.Time{}, toFree: map[uuid.UUID]bool{},
		held: map[uuid.UUID]bool{}, wake: make(chan struct{}, 1)}
	g.timer = time.AfterFunc(time.Hour, g.poke)
	return g
}

// Lock asks for the request's gate; it returns at once.
func (g *gate) Lock(id uuid.UUID) {
	g.mu.Lock()
	if len(g.held)+len(g.toLock) < g.limit {
		if len(g.toLock) == 0 {
			g.timer.Reset(gateDelay)
		}
		g.toLock[id] = time.Now()
	}
	g.mu.Unlock()
}

// Unlock releases the request's gate (or forgets a lock not taken yet); it returns at once.
func (g *gate) Unlock(id uuid.UUID) {
	g.mu.Lock()
	_, pending := g.toLock[id]
	if pending {
		delete(g.toLock, id)
	} else {
		// Held, or being locked by the flush in progress: the next flush frees it.
		g.toFree[id] = true
	}
	g.mu.Unlock()
	if !pending {
		g.poke()
	}
}

func (g *gate) poke() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// run owns the gate connection until ctx ends, reconnecting with backoff.
func (g *gate) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := g.session(ctx)
		g.mu.Lock()
		clear(g.held) // the session's locks died with it
		clear(g.toFree)
		g.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		g.log.Warn("request gate connection lost; waiters poll until it is back", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (g *gate) session(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(g.dsn)
	if err != nil {
		return err
	}
	pgsession.Pin(cfg.RuntimeParams)
	cfg.RuntimeParams["application_name"] = g.appName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.wake:
		}
		if err := g.flush(ctx, conn); err != nil {
			return err
		}
	}
}

// flush releases finished gates first, then takes new ones, one round trip each.
func (g *gate) flush(ctx context.Context, conn *pgx.Conn) error {
	g.mu.Lock()
	var free, lock []uuid.UUID
	for id := range g.toFree {
		if g.held[id] {
			free = append(free, id)
		}
	}
	clear(g.toFree)
	now, next := time.Now(), time.Duration(0)
	for id, admitted := range g.toLock {
		if wait := gateDelay - now.Sub(admitted); wait > 0 {
			if next == 0 || wait < next {
				next = max(wait, time.Millisecond) // coalesce flushes to at most one a millisecond
			}
			continue
		}
		lock = append(lock, id)
		delete(g.toLock, id)
	}
	if next > 0 {
		g.timer.Reset(next)
	}
	g.mu.Unlock()
	if len(free) > 0 {
		if _, err := conn.Exec(ctx, gateUnlockSQL, free); err != nil {
			return err
		}
		g.mu.Lock()
		for _, id := range free {
			delete(g.held, id)
		}
		g.mu.Unlock()
	}
	if len(lock) == 0 {
		return nil
	}
	rows, err := conn.Query(ctx, gateLockSQL, lock)
	if err != nil {
		return err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return err
	}
	g.mu.Lock()
	for _, id := range got {
		g.held[id] = true
	}
	again := len(g.toFree) > 0
	g.mu.Unlock()
	if again {
		g.poke()
	}
	return nil
}
