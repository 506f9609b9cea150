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
// once the section ends; otherwise it connects (and fences) before returning.
func (l *Locked) ConnectAhead(ctx context.Context, database string) *Dial {
	d := &Dial{done: make(chan struct{})}
	if att := fence.FromContext(ctx); att != nil && !att.Fenced(l.cluster.Name) {
		d.conn, d.err = l.Connect(ctx, database)
		close(d.done)
		return d
	}
	a, c := l.admin, l.cluster
	go func() {
		defer close(d.done)
		d.conn, d.err = a.connect(ctx, c, database)
	}()
	return d
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

// Close waits for the connection and closes it unless Conn took it.
func (d *Dial) Close(ctx context.Context) {
	<-d.done
	if !d.taken && d.conn != nil {
		d.taken = true
		_ = d.conn.Close(context.WithoutCancel(ctx))
	}
}
