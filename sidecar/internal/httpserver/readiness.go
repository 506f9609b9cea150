package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// readyTimeout bounds one readiness check, so a hung database answers 503 instead of hanging the
// probe.
const readyTimeout = 3 * time.Second

// Readiness is what the sidecar knows about its own state when /readyz is asked.
type Readiness struct {
	// Leader is true while this sidecar holds the leader lock.
	Leader bool
	// StandbyReady is true for a standby that is connected and would take over at once.
	StandbyReady bool
	// SchemaVersion is the version installed in the control database; WantSchemaVersion is the
	// one this binary was built for. Ready requires them equal.
	SchemaVersion     string
	WantSchemaVersion string
	// Detail is optional text appended to the answer (e.g. why a standby is not ready).
	Detail string
}

// ReadinessFunc reports the current readiness; an error means it could not be determined.
type ReadinessFunc func(ctx context.Context) (Readiness, error)

// Problems lists why r is not ready; empty means ready.
func (r Readiness) Problems() []string {
	var p []string
	if !r.Leader && !r.StandbyReady {
		p = append(p, "not the leader and not a ready standby")
	}
	if r.SchemaVersion != r.WantSchemaVersion {
		p = append(p, fmt.Sprintf("schema version %q installed, this binary needs %q: run `dataenv install`",
			r.SchemaVersion, r.WantSchemaVersion))
	}
	return p
}

// role names what r says this sidecar is.
func (r Readiness) role() string {
	switch {
	case r.Leader:
		return "leader"
	case r.StandbyReady:
		return "standby"
	default:
		return "not ready"
	}
}

func readyHandler(ready ReadinessFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if ready == nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: no readiness check configured")
			return
		}
		ctx, cancel := context.WithTimeout(req.Context(), readyTimeout)
		defer cancel()
		r, err := ready(ctx)
		if err != nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: readiness check failed: "+err.Error())
			return
		}
		body := readyBody(r)
		if len(r.Problems()) > 0 {
			writeText(w, http.StatusServiceUnavailable, body)
			return
		}
		writeText(w, http.StatusOK, body)
	})
}

func readyBody(r Readiness) string {
	var b strings.Builder
	if p := r.Problems(); len(p) > 0 {
		b.WriteString("not ready: " + strings.Join(p, "; "))
	} else {
		fmt.Fprintf(&b, "ready: %s, schema version %s", r.role(), r.SchemaVersion)
	}
	if r.Detail != "" {
		b.WriteString(" (" + r.Detail + ")")
	}
	return b.String()
}
