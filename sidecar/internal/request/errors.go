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

// Retryable wraps err as retryable (nil stays nil, a retryable error is not wrapped twice).
func Retryable(err error) error {
	if err == nil || IsRetryable(err) {
		return err
	}
	return &RetryableError{Err: err}
}

// IsRetryable reports whether err asks for another attempt.
func IsRetryable(err error) bool {
	var r *RetryableError
	return errors.As(err, &r)
}

// RefusedError is a request refused for a reason the caller can act on: bad input, a guard that
// held (a missing marker, a use, not a member). Retrying does not help until someone acts on its
// text, so it is never retried.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

// Refusef builds a refusal.
func Refusef(format string, args ...any) error {
	return &RefusedError{msg: fmt.Sprintf(format, args...)}
}

// IsRefused reports whether err is, or wraps, a refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}

// ErrCancelledByUser is the cause of a handler's context when dataenv.cancel() stopped it, so a
// handler that writes its outcome elsewhere too (a satellite's row) can tell a cancellation from
// a shutdown.
var ErrCancelledByUser = errors.New("cancelled by dataenv.cancel()")
