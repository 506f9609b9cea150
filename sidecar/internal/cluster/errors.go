package cluster

import (
	"strings"

	"github.com/dataenv/dataenv/sidecar/internal/request"
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

func retryable(err error) error { return request.Retryable(err) }
