package workspace

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

func TestParseCreateArgs(t *testing.T) {
	req := func(args string) *request.Request {
		return &request.Request{ID: uuid.New(), Kind: KindCreateFork, Args: json.RawMessage(args)}
	}
	a, err := parseCreateArgs(req(`{"parent": "p", "fork": "f", "datatables": {"d": "full_copy"}}`))
	if err != nil || a.Datatables["d"] != ModeFullCopy || a.SharedLakes == nil {
		t.Fatalf("%+v %v", a, err)
	}
	// The argument rules are the SQL validator's (tests/forks); decoding still refuses what does
	// not fit the type.
	for args, want := range map[string]string{
		`{"parent": "p", "fork": "f", "datatables": {"d": 1}}`: "bad arguments",
		`{"parent": "p", "fork": "f", "bogus": true}`:          "unknown field",
	} {
		_, err := parseCreateArgs(req(args))
		if err == nil || !strings.Contains(err.Error(), want) || !request.IsRefused(err) {
			t.Errorf("%s: %v, want a refusal with %q", args, err, want)
		}
	}
}

// pg_restore --verbose lines are counted as they arrive, whatever the write boundaries.
func TestTailCountsRestoreLines(t *testing.T) {
	var n atomic.Int64
	tl := &tail{count: &n}
	text := "pg_restore: connecting to database for restore\npg_restore: creating TABLE \"public.t\"\npg_restore: processing data for table \"public.t\"\npg_restore: creating INDEX \"public.i\"\n"
	for i := 0; i < len(text); i += 7 {
		_, _ = tl.Write([]byte(text[i:min(i+7, len(text))]))
	}
	if n.Load() != 3 {
		t.Fatalf("counted %d lines, want 3", n.Load())
	}
	big := strings.Repeat("x", tailMax*2)
	_, _ = tl.Write([]byte(big + "END"))
	if s := tl.String(); len(s) > tailMax || !strings.HasSuffix(s, "END") {
		t.Fatalf("tail kept %d bytes", len(s))
	}
}
