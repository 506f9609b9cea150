package request_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

func TestIsTransient(t *testing.T) {
	pg := func(code string) error { return fmt.Errorf("step: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	transient := []error{
		request.Retryable(errors.New("cluster restarting")),
		pg("57P01"), pg("57P03"), pg("40001"), pg("40P01"), pg("55P03"), pg("08006"), pg("53300"),
		pg("23505"), pg("42710"), pg("42P04"),
		fmt.Errorf("read: %w", io.ErrUnexpectedEOF),
		errors.New("pg_restore failed (exit status 1): pg_restore: error: could not execute query: server closed the connection unexpectedly"),
		errors.New("psql: FATAL:  terminating connection due to administrator command"),
		errors.New(`DuckDB: Invalid Error: Failed to execute query "ROLLBACK": `),
		errors.New("drop_fork: x: 1 fork copies could not be dropped (fence cluster: this sidecar no longer holds the leader lock; the leader resumes its requests)"),
		fmt.Errorf("cleanup: %w", selfJudged{transient: true, text: "permission denied"}), // its own word beats the text
	}
	final := []error{
		request.Refusef("database x is in use"),
		request.Refusef("DuckDB: server closed the connection unexpectedly"), // a refusal stays final
		pg("28P01"), pg("42501"), pg("3D000"), pg("22023"),
		errors.New("pg_dump: error: connection to server at \"h\" failed: FATAL:  password authentication failed for user \"x\""),
		errors.New("syntax error at or near \"SELEC\""),
		errors.New(`DuckDB: IO Error: Unable to connect to Postgres at "host=h dbname=x": connection to server at "h", port 5432 failed: fe_sendauth: no password supplied`),
		context.Canceled,
		fmt.Errorf("job: %w", context.DeadlineExceeded),
		fmt.Errorf("cleanup: %w", selfJudged{transient: false, text: "server closed the connection unexpectedly"}),
	}
	for _, err := range transient {
		if !request.IsTransient(err) {
			t.Errorf("IsTransient(%v) = false, want true", err)
		}
	}
	for _, err := range final {
		if request.IsTransient(err) {
			t.Errorf("IsTransient(%v) = true, want false", err)
		}
	}
}

// selfJudged is an error that says whether it is transient (like lake.CleanupError).
type selfJudged struct {
	transient bool
	text      string
}

func (e selfJudged) Error() string   { return e.text }
func (e selfJudged) Transient() bool { return e.transient }
