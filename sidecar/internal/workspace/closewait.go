package workspace

import (
	"context"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
)

// exitWaitLimit bounds closeAwaitingExit: the server itself waits no longer for the sessions of
// a CREATE DATABASE template (5 s), after which it refuses the copy.
const exitWaitLimit = 5 * time.Second

// terminateMessage is the protocol's Terminate message ('X', length 4).
var terminateMessage = []byte{'X', 0, 0, 0, 4}

// closeAwaitingExit closes conn, an idle connection to a database that is about to be the
// template of a CREATE DATABASE, and returns once the server process behind it has exited. A
// backend outlives its client's close for a moment (much longer on a loaded machine), and a
// CREATE DATABASE ... TEMPLATE that still finds it connected sleeps 100 ms before it looks
// again. The server closes the socket only after the backend has left the process array, so
// reading the socket to its end is the wait, with nothing polled. A connection that cannot be
// taken over is closed as usual.
func closeAwaitingExit(ctx context.Context, conn *pgx.Conn) {
	ctx = context.WithoutCancel(ctx)
	pc := conn.PgConn()
	if err := pc.SyncConn(ctx); err != nil {
		_ = conn.Close(ctx)
		return
	}
	h, err := pc.Hijack()
	if err != nil {
		_ = conn.Close(ctx)
		return
	}
	nc := h.Conn
	defer nc.Close()
	if err := nc.SetDeadline(time.Now().Add(exitWaitLimit)); err != nil {
		return
	}
	if _, err := nc.Write(terminateMessage); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, nc) // returns at the server's close (EOF), or at the deadline
}
