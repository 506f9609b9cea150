package request

import (
	"errors"
	"fmt"
)

// RetryableError marks a failure that is worth another attempt (a cluster that is restarting, a
// lock timeout). The dispatcher retries it with backoff up to its attempt limit; every other error
// fails the request at once.
type RetryableError struct{ Err error }

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// Retryable wraps err as retryable.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err}
}

// IsRetryable reports whether err asks for another attempt.
func IsRetryable(err error) bool {
	var r *RetryableError
	return errors.As(err, &r)
}

// Refusef builds the error of a request refused for a reason the caller can act on (bad input,
// a guard that held). It is never retried.
func Refusef(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}
