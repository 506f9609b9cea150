package satellite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/internal/pgsession"
)

// Pool holds the sidecar's connections to satellite databases: at most max of them, open and
// idle together, shared by every satellite. A connection is opened when an envelope needs its
// database and closed after idleTimeout unused; when all max are open and none is free for the
// database wanted, the oldest idle one (of another database) is closed for it, and only when none
// is idle does a caller wait. So 100 satellites never mean 100 pools.
//
// Waiting callers are served by database: a connection given back while a caller waits for its
// database goes straight to that caller (a queue of envelopes for one database costs one dial,
// not one each), otherwise it is closed for the oldest waiter, who dials into its slot. A
// connection handed on maxStreak times in a row while older callers of other databases wait is
// closed for the oldest of them instead, so one busy satellite cannot keep the others waiting.
type Pool struct {
	control     *pgxpool.Pool // where a closed connection's backend is watched until it is gone
	base        *pgx.ConnConfig
	max         int
	idleTimeout time.Duration

	mu      sync.Mutex
	open    int        // slots taken: connections open, being dialed or being closed
	inUse   int        // slots held by callers (running an envelope or dialing for one)
	idle    []idleConn // oldest first
	waiters []*waiter  // oldest first
}

const maxStreak = 8

// Conn is a pooled connection to one satellite database.
type Conn struct {
	*pgx.Conn
	oid uint32
	// attested is the database OID whose installer's tables were proven in this session
	// (attest), 0 before that and after any error on the connection.
	attested uint32
	streak   int // handed on without going idle while other databases waited
}

type idleConn struct {
	conn  *Conn
	since time.Time
}

// waiter is a caller waiting for a connection to oid: it is given one (conn) or a slot to dial
// into (conn nil). g has room for the one grant, so the granter never blocks.
type waiter struct {
	oid uint32
	g   chan *Conn
}

// NewPool returns a pool dialing with base (a copy of the control's settings: same server and
// role) with the database replaced and search_path pinned at connection start.
func NewPool(control *pgxpool.Pool, limit int, idleTimeout time.Duration) *Pool {
	cfg := control.Config().ConnConfig.Copy()
	// A satellite database's owner may have set session defaults (role among them) for it.
	pgsession.Pin(cfg.RuntimeParams)
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

// Waiting returns how many callers wait for a connection.
func (p *Pool) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}

// Acquire returns a connection to database datname (OID oid) and the function that gives it back;
// release(false) closes it (after an error that may have left it unusable).
func (p *Pool) Acquire(ctx context.Context, oid uint32, datname string) (*Conn, func(healthy bool), error) {
	conn, evict, dial, w := p.take(oid)
	if w != nil {
		select {
		case conn = <-w.g:
		case <-ctx.Done():
			p.abandon(w)
			return nil, nil, context.Cause(ctx)
		}
		dial = conn == nil
	}
	if dial {
		if evict != nil {
			p.closeConn(evict)
		}
		c, err := p.dial(ctx, oid, datname)
		if err != nil {
			p.giveUpSlot()
			return nil, nil, err
		}
		conn = c
	}
	return conn, p.releaser(conn), nil
}

// take decides under the lock: an idle connection to oid; or a slot to dial into (free, or
// freed by evicting the oldest idle connection); or a place in the queue.
func (p *Pool) take(oid uint32) (conn, evict *Conn, dial bool, w *waiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i].conn.oid == oid {
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
	w = &waiter{oid: oid, g: make(chan *Conn, 1)}
	p.waiters = append(p.waiters, w)
	return nil, nil, false, w
}

// abandon takes w out of the queue; a grant that reached it already is passed on.
func (p *Pool) abandon(w *waiter) {
	p.mu.Lock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.mu.Unlock()
			return
		}
	}
	p.mu.Unlock()
	// Granted (or about to be, once a closing backend is gone): pass it on.
	go func() {
		if c := <-w.g; c != nil {
			p.put(c)
		} else {
			p.giveUpSlot()
		}
	}()
}

func (p *Pool) dial(ctx context.Context, oid uint32, datname string) (*Conn, error) {
	cfg := p.base.Copy()
	cfg.Database = datname
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to satellite database %s: %w", datname, err)
	}
	return &Conn{Conn: conn, oid: oid}, nil
}

// giveUpSlot gives back a caller's slot whose connection failed to open or was closed: to the
// oldest waiter, to dial into, or free.
func (p *Pool) giveUpSlot() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.popWaiterLocked(); w != nil {
		w.g <- nil
		return
	}
	p.open--
	p.inUse--
}

func (p *Pool) releaser(conn *Conn) func(bool) {
	var once sync.Once
	return func(healthy bool) {
		once.Do(func() {
			if !healthy || conn.IsClosed() || conn.PgConn().TxStatus() != 'I' {
				p.closeConn(conn)
				p.giveUpSlot()
				return
			}
			p.put(conn)
		})
	}
}

// put gives back a healthy connection: to a caller waiting for its database, else closed for the
// oldest waiter (in the background: the slot stays taken until its backend is gone), else idle.
func (p *Pool) put(conn *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.sameDatabaseWaiterLocked(conn); w != nil {
		w.g <- conn
		return
	}
	if w := p.popWaiterLocked(); w != nil {
		go func() {
			p.closeConn(conn)
			w.g <- nil
		}()
		return
	}
	conn.streak = 0
	p.inUse--
	p.idle = append(p.idle, idleConn{conn: conn, since: time.Now()})
}

// sameDatabaseWaiterLocked takes the oldest waiter for conn's database out of the queue, unless
// conn's streak is used up while a caller of another database has waited longer.
func (p *Pool) sameDatabaseWaiterLocked(conn *Conn) *waiter {
	for i, w := range p.waiters {
		if w.oid != conn.oid {
			if conn.streak >= maxStreak {
				return nil
			}
			continue
		}
		p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
		if i == 0 {
			conn.streak = 0 // nobody older was passed over
		} else {
			conn.streak++
		}
		return w
	}
	return nil
}

func (p *Pool) popWaiterLocked() *waiter {
	if len(p.waiters) == 0 {
		return nil
	}
	w := p.waiters[0]
	p.waiters = p.waiters[1:]
	return w
}

// CloseIdle closes the connections idle since before cutoff (all of them with a zero cutoff,
// at shutdown).
func (p *Pool) CloseIdle(cutoff time.Time) {
	p.mu.Lock()
	var closing []*Conn
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
		if w := p.popWaiterLocked(); w != nil {
			p.inUse++
			w.g <- nil
		} else {
			p.open--
		}
		p.mu.Unlock()
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
