package cluster

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/fence"
)

// Dial is an admin connection opened ahead of its use (Locked.ConnectAhead). Its owner calls
// Conn to take the connection, or Close, on every path.
type Dial struct {
	done  chan struct{}
	conn  *pgx.Conn
	err   error
	taken bool
}

// ConnectAhead starts opening an admin connection to database (as Connect) while the caller goes
// on: a new session costs a few milliseconds that other work can hide, and the connection may be
// used under a later lifecycle-lock section of the same attempt. It connects in the background
// only when the attempt has fenced the cluster already (or runs unfenced), because fencing reads
// the control database on the lock's connection, which the caller keeps using and which is gone
// once the section ends; otherwise it connects (and fences) before returning. Fence first to
// connect in the background all the same.
func (l *Locked) ConnectAhead(ctx context.Context, database string) *Dial {
	return l.connectAhead(ctx, database, nil)
}

// connectAhead is ConnectAhead, with check (if not nil) run on the new connection, which is
// closed when check fails.
func (l *Locked) connectAhead(ctx context.Context, database string, check func(context.Context, *pgx.Conn) error) *Dial {
	d := &Dial{done: make(chan struct{})}
	if att := fence.FromContext(ctx); att != nil && !att.Fenced(l.cluster.Name) {
		d.conn, d.err = l.Connect(ctx, database)
		d.checked(ctx, check)
		close(d.done)
		return d
	}
	a, c := l.admin, l.cluster
	go func() {
		defer close(d.done)
		d.conn, d.err = a.connect(ctx, c, database)
		d.checked(ctx, check)
	}()
	return d
}

// checked runs check on a connection just opened, and closes it if the check fails.
func (d *Dial) checked(ctx context.Context, check func(context.Context, *pgx.Conn) error) {
	if d.err != nil || check == nil {
		return
	}
	if d.err = check(ctx, d.conn); d.err != nil {
		_ = d.conn.Close(context.WithoutCancel(ctx))
		d.conn = nil
	}
}

// Fence ends, on the cluster, the sessions of the request's earlier attempts and of former
// leaders, if the attempt has not done so yet (see fenceOn); a first attempt with nothing to end
// opens no connection for it. ConnectAhead connects in the background once it has run.
func (l *Locked) Fence(ctx context.Context) error {
	return l.admin.fenceForLibpq(ctx, l)
}

// Conn waits for the connection and hands it over: the caller closes it. Later calls return nil.
func (d *Dial) Conn() (*pgx.Conn, error) {
	<-d.done
	if d.taken {
		return nil, d.err
	}
	d.taken = true
	return d.conn, d.err
}

// Peek waits for the connection and lends it: the Dial keeps it, for Conn or Close. None (nil,
// nil) once Conn has taken it.
func (d *Dial) Peek() (*pgx.Conn, error) {
	<-d.done
	if d.taken {
		return nil, nil
	}
	return d.conn, d.err
}

// Close waits for the connection and closes it unless Conn took it; a nil Dial is none.
func (d *Dial) Close(ctx context.Context) {
	if d == nil {
		return
	}
	<-d.done
	if !d.taken && d.conn != nil {
		d.taken = true
		_ = d.conn.Close(context.WithoutCancel(ctx))
	}
}
