package request

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsTransient reports whether err is a fault that another attempt can cure, so that the
// dispatcher retries the request (with capped backoff, shown as a "retrying" step) instead of
// failing it: a RetryableError; a lost or refused connection; a server shutting down, starting or
// restarting (57P01-57P03); a serialization failure or deadlock (40001, 40P01); a lock or
// statement timeout (55P03, 57014); too many connections (53300); and a unique violation or
// "already exists" (23505, 42710, 42P04), which on the names dataenv generates means an earlier
// attempt, or a concurrent request, is still finishing: handlers check state before they act, so
// the next attempt sees what that one did. Text from tools and engines that do not return
// SQLSTATEs (psql, pg_restore, DuckDB) is matched against libpq's connection-loss messages.
//
// An error that says itself whether it is transient (a Transient() bool method, such as a
// cleanup that reports several failures: transient only when every one is) is taken at its word.
// A refusal (RefusedError) is never transient: it waits for a person to act.
func IsTransient(err error) bool {
	if err == nil || IsRefused(err) {
		return false
	}
	if IsRetryable(err) {
		return true
	}
	var self interface{ Transient() bool }
	if errors.As(err, &self) {
		return self.Transient()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return transientCode(pgErr.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false // a deadline the handler set (a job's timeout), or a cancellation
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		pgconn.SafeToRetry(err):
		return true
	}
	return TransientText(err.Error())
}

func transientCode(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
		"40001", "40P01", // serialization failure, deadlock
		"55P03", "57014", // lock not available (lock_timeout), query cancelled (statement_timeout)
		"53300",                   // too many connections
		"23505", "42710", "42P04": // unique violation, duplicate object, duplicate database
		return true
	}
	return strings.HasPrefix(code, "08") // connection exceptions
}

// transientPhrases are messages of libpq, the server and DuckDB's postgres extension when a
// connection is lost or a server is not (yet) accepting work.
var transientPhrases = []string{
	"terminating connection due to administrator command",
	"terminating connection due to unexpected postmaster exit",
	"terminating connection because of crash of another server process",
	"server closed the connection unexpectedly",
	"the database system is shutting down",
	"the database system is starting up",
	"the database system is in recovery mode",
	"the database system is not yet accepting connections",
	"could not connect to server",
	"connection to server",
	"no connection to the server",
	"SSL connection has been closed unexpectedly",
	"SSL SYSCALL error",
	"could not receive data from server",
	"could not send data to server",
	"connection refused",
	"connection reset by peer",
	"broken pipe",
	"canceling statement due to lock timeout",
	"canceling statement due to statement timeout",
	"could not serialize access",
	"deadlock detected",
	"conn closed",
	`failed to execute query "rollback"`, // DuckDB's postgres extension on a connection that died mid-transaction
	"no longer holds the leader lock",    // a sidecar that lost leadership stopped; the leader resumes the request
	"unexpected EOF",
	"(SQLSTATE 57P01)",
	"(SQLSTATE 57P02)",
	"(SQLSTATE 57P03)",
}

// actionPhrases are failures a person must act on even when they come as a connection error.
var actionPhrases = []string{
	"password authentication failed", "authentication failed", "no pg_hba.conf entry", "no password supplied",
	"permission denied", "does not exist", "certificate",
}

// TransientText reports whether an error text from a tool or engine that returns no SQLSTATE
// (psql, pg_dump, pg_restore, DuckDB) says a connection was lost or a server was restarting.
// Handlers that turn such text into a RefusedError (a DuckDB job error, say) check it first and
// return Retryable instead.
func TransientText(msg string) bool {
	lower := strings.ToLower(msg)
	for _, p := range actionPhrases {
		if strings.Contains(lower, p) {
			return false
		}
	}
	for _, p := range transientPhrases {
		if strings.Contains(lower, strings.ToLower(p)) {
			return true
		}
	}
	return false
}
