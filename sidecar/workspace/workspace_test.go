package workspace

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/request"
)

func TestValidateWorkspaceID(t *testing.T) {
	for _, ok := range []string{"a", "ws-1", "team/feature.x", "0day", strings.Repeat("a", 63)} {
		if err := ValidateWorkspaceID(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "A", "a//b", "/a", "a/", "-a", "a b", "a;b", "é", strings.Repeat("a", 64), "a/.b"} {
		if err := ValidateWorkspaceID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseCreateArgs(t *testing.T) {
	req := func(args string) *request.Request {
		return &request.Request{ID: uuid.New(), Kind: KindCreateFork, Args: json.RawMessage(args)}
	}
	a, err := parseCreateArgs(req(`{"parent": "p", "fork": "f", "datatables": {"d": "full_copy"}}`))
	if err != nil || a.Datatables["d"] != ModeFullCopy || a.SharedLakes == nil {
		t.Fatalf("%+v %v", a, err)
	}
	for args, want := range map[string]string{
		`{"parent": "p", "fork": "p"}`:                           "its own fork",
		`{"parent": "p", "fork": "f", "datatables": {"d": 1}}`:   "bad args",
		`{"parent": "p", "fork": "f", "datatables": {"d": "x"}}`: "mode must be",
		`{"parent": "p", "fork": "f", "bogus": true}`:            "unknown field",
		`{"parent": "p", "fork": "F"}`:                           "not allowed",
		`{"parent": "p", "fork": "f", "shared_lakes": ["A"]}`:    "not a lake name",
	} {
		_, err := parseCreateArgs(req(args))
		if err == nil || !strings.Contains(err.Error(), want) || !isRefused(err) {
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
