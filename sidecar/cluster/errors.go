package cluster

import (
	"errors"
	"strings"

	"github.com/dataenv/dataenv/sidecar/request"
)

// scrubbed is an error whose text has had secrets replaced; it still unwraps to the original.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub replaces every non-empty secret in err's text. It is a safety net: no code path is meant
// to put a secret into an error in the first place.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

func retryable(err error) error {
	if request.IsRetryable(err) {
		return err
	}
	return request.Retryable(err)
}

// RefusedError is a request refused by a guard (a missing marker, a use, a name): retrying will
// not help until someone acts on its text.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &RefusedError{msg: request.Refusef(format, args...).Error()}
}

// IsRefused reports whether err is a refusal.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
