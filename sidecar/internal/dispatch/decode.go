package dispatch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/replication"
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// requestFromChange builds a request from a decoded row of dataenv.requests: the decoded tuple is
// what the sidecar works from, because the row may not be visible to a new snapshot yet.
func requestFromChange(ch replication.Change) (request.Request, error) {
	var r request.Request
	id, _ := ch.Value("id")
	parsed, err := uuid.Parse(id)
	if err != nil {
		return r, fmt.Errorf("decoded request id %q: %w", id, err)
	}
	r.ID = parsed
	r.Kind, _ = ch.Value("kind")
	if args, ok := ch.Value("args"); ok {
		r.Args = json.RawMessage(args)
	}
	status, _ := ch.Value("status")
	r.Status = request.Status(status)
	if a, ok := ch.Value("attempts"); ok {
		if r.Attempts, err = strconv.Atoi(a); err != nil {
			return r, fmt.Errorf("decoded request %s attempts %q: %w", r.ID, a, err)
		}
	}
	r.RequestedBy, _ = ch.Value("requested_by")
	if c, ok := ch.Value("cancel_requested"); ok {
		r.CancelRequested = c == "t"
	}
	if ts, ok := ch.Value("created_at"); ok {
		r.CreatedAt, _ = parseTimestamptz(ts)
	}
	return r, nil
}

// parseTimestamptz parses Postgres' text output of timestamptz (ISO DateStyle).
func parseTimestamptz(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00", "2006-01-02 15:04:05.999999-07:00:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("parse timestamptz %q", s)
}
