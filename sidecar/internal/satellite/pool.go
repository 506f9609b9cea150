package satellite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool holds the sidecar's connections to satellite databases: at most max of them, open and
// idle together, shared by every satellite. A connection is opened when an envelope needs its
// database and closed after idleTimeout unused; when all max are open and none is free for the
// database wanted, the oldest idle one (of another database) is closed for it, and only when none
// is idle does a caller wait. So 100 satellites never mean 100 pools.
type Pool struct {
	control     *pgxpool.Pool // where a closed connection's backend is watched until it is gone
	base        *pgx.ConnConfig
	max         int
	idleTimeout time.Duration

	mu      sync.Mutex
	open    int
	inUse   int
	idle    []idleConn // oldest first
	waiters []chan struct{}
}

type idleConn struct {
	oid   uint32
	conn  *pgx.Conn
	since time.Time
}

// NewPool returns a pool dialing with base (a copy of the control's settings: same server and
// role) with the database replaced and search_path pinned at connection start.
func NewPool(control *pgxpool.Pool, limit int, idleTimeout time.Duration) *Pool {
	cfg := control.Config().ConnConfig.Copy()
	cfg.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
	cfg.RuntimeParams["application_name"] = "dataenv_satellite_envelopes"
	cfg.RuntimeParams["lock_timeout"] = "5s"
	// Most connections serve one envelope (more satellites than connections): preparing and
	// caching each statement would cost a round trip and server memory for nothing.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	return &Pool{control: control, base: cfg, max: max(limit, 1), idleTimeout: idleTimeout}
}

// Stats returns the connections open (in use or idle) and in use.
func (p *Pool) Stats() (open, inUse int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open, p.inUse
}

// Acquire returns a connection to database datname (OID oid) and the function that gives it back;
// release(false) closes it (after an error that may have left it unusable).
func (p *Pool) Acquire(ctx context.Context, oid uint32, datname string) (*pgx.Conn, func(healthy bool), error) {
	for {
		conn, evict, dial, wait := p.take(oid)
		if conn != nil {
			return conn, p.releaser(oid, conn), nil
		}
		if dial {
			if evict != nil {
				p.closeConn(evict)
			}
			conn, err := p.dial(ctx, datname)
			if err != nil {
				p.forget()
				return nil, nil, err
			}
			return conn, p.releaser(oid, conn), nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			p.dropWaiter(wait)
			return nil, nil, context.Cause(ctx)
		}
	}
}

// take decides under the lock: an idle connection to oid; or a slot to dial into (free, or
// freed by evicting the oldest idle connection); or a channel to wait on.
func (p *Pool) take(oid uint32) (conn, evict *pgx.Conn, dial bool, wait chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i].oid == oid {
			conn = p.idle[i].conn
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.inUse++
			return conn, nil, false, nil
		}
	}
	if p.open < p.max {
		p.open++
		p.inUse++
		return nil, nil, true, nil
	}
	if len(p.idle) > 0 {
		evict = p.idle[0].conn
		p.idle = p.idle[1:]
		p.inUse++
		return nil, evict, true, nil
	}
	wait = make(chan struct{})
	p.waiters = append(p.waiters, wait)
	return nil, nil, false, wait
}

func (p *Pool) dial(ctx context.Context, datname string) (*pgx.Conn, error) {
	cfg := p.base.Copy()
	cfg.Database = datname
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to satellite database %s: %w", datname, err)
	}
	return conn, nil
}

// forget gives back the slot of a connection that failed to open or was closed.
func (p *Pool) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open--
	p.inUse--
	p.wakeLocked()
}

func (p *Pool) releaser(oid uint32, conn *pgx.Conn) func(bool) {
	var once sync.Once
	return func(healthy bool) {
		once.Do(func() {
			if !healthy || conn.IsClosed() || conn.PgConn().TxStatus() != 'I' {
				p.closeConn(conn)
				p.forget()
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			p.inUse--
			p.idle = append(p.idle, idleConn{oid: oid, conn: conn, since: time.Now()})
			p.wakeLocked()
		})
	}
}

func (p *Pool) wakeLocked() {
	if len(p.waiters) > 0 {
		close(p.waiters[0])
		p.waiters = p.waiters[1:]
	}
}

func (p *Pool) dropWaiter(w chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			return
		}
	}
	// Woken already: pass the wake-up on, or it is lost.
	p.wakeLocked()
}

// CloseIdle closes the connections idle since before cutoff (all of them with a zero cutoff,
// at shutdown).
func (p *Pool) CloseIdle(cutoff time.Time) {
	p.mu.Lock()
	var closing []*pgx.Conn
	kept := p.idle[:0]
	for _, ic := range p.idle {
		if cutoff.IsZero() || ic.since.Before(cutoff) {
			closing = append(closing, ic.conn)
		} else {
			kept = append(kept, ic)
		}
	}
	p.idle = kept
	p.mu.Unlock()
	for _, c := range closing {
		p.closeConn(c) // keeps its slot (open) until its backend is gone
		p.mu.Lock()
		p.open--
		p.wakeLocked()
		p.mu.Unlock()
	}
}

// closeConn closes conn and waits (briefly) until its server backend has exited: a backend
// outlives its client's close for a moment, and the slot is given to a new connection only once
// it is gone, so the server never sees more than max of them.
func (p *Pool) closeConn(conn *pgx.Conn) {
	pid := conn.PgConn().PID()
	_ = conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pause := time.Millisecond
	for {
		var alive bool
		err := p.control.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive)
		if err != nil || !alive {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(pause*2, 20*time.Millisecond)
	}
}

// Run closes idle connections past the idle timeout until ctx ends, then all idle ones.
func (p *Pool) Run(ctx context.Context) {
	t := time.NewTicker(max(p.idleTimeout/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.CloseIdle(time.Time{})
			return
		case <-t.C:
			p.CloseIdle(time.Now().Add(-p.idleTimeout))
		}
	}
}
