package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
)

// MustExec runs sql on conn and fails the test on error.
func MustExec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Query returns the single value sql selects; no row, NULL or an error fail the test.
func Query[T any](t testing.TB, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// QueryText returns the text value sql selects, "" for NULL or no row.
func QueryText(t testing.TB, conn *pgx.Conn, sql string, args ...any) string {
	t.Helper()
	var s *string
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&s); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("%s: %v", sql, err)
	}
	if s == nil {
		return ""
	}
	return *s
}
