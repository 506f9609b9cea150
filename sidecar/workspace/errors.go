package workspace

import (
	"errors"

	"github.com/dataenv/dataenv/sidecar/cluster"
	"github.com/dataenv/dataenv/sidecar/request"
)

// RefusedError is a request refused by a guard (not a member, a name in use, child forks):
// retrying will not help until someone acts on its text.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

func refusef(format string, args ...any) error {
	return &RefusedError{msg: request.Refusef(format, args...).Error()}
}

// isRefused reports whether err is a refusal of this package or of the cluster package.
func isRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r) || cluster.IsRefused(err)
}

// ErrNotFound is returned by the resolution functions for a workspace or datatable that does
// not exist.
var ErrNotFound = errors.New("not found")

func retryable(err error) error {
	if err == nil || request.IsRetryable(err) {
		return err
	}
	return request.Retryable(err)
}
