package satellite

import (
	"context"
	"io"
	"time"
)

// closeConn closes conn and waits (briefly) until its server backend has exited: a backend
// outlives its client's close for a moment, and the slot is given to a new connection only once
// it is gone, so the server never sees more than max of them.
//
// The wait is read off the socket, a "synchronous close": a backend leaves its client socket open
// until its process dies (pqcomm.c, socket_close, says so for this very use), so end-of-file
// after Terminate means it is gone, with no query in the control database. When the socket
// cannot tell (a busy or broken connection, a timeout), pg_stat_activity is polled instead.
func (p *Pool) closeConn(conn *Conn) {
	pid := conn.PgConn().PID()
	if hc, err := conn.PgConn().Hijack(); err == nil {
		nc := hc.Conn
		_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
		_, werr := nc.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
		var rerr error
		if werr == nil {
			_, rerr = io.Copy(io.Discard, nc) // nil at end-of-file
		}
		_ = nc.Close()
		if werr == nil && rerr == nil {
			return
		}
	} else {
		_ = conn.Close(context.Background())
	}
	p.waitGone(pid)
}

// waitGone polls the control database until backend pid is gone (at most 2 s).
func (p *Pool) waitGone(pid uint32) {
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
