package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dataenv/dataenv/runner/protocol"
)

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "dataenv-runner run") {
		t.Fatalf("--help: %d\n%s", code, out.String())
	}
}

func TestJobOnStdinWritesTheResultFile(t *testing.T) {
	dir := t.TempDir()
	req := protocol.Request{Blocks: []string{"SELECT 1 AS a", "SELECT getvariable('n') + 1 AS b"},
		Args: map[string]json.RawMessage{"n": json.RawMessage("41")}, ResultPath: filepath.Join(dir, "r.json")}
	in, _ := json.Marshal(req)
	var stderr bytes.Buffer
	if code := run(nil, bytes.NewReader(in), &stderr, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(req.ResultPath)
	if err != nil {
		t.Fatal(err)
	}
	var resp protocol.Response
	if err := json.Unmarshal(data, &resp); err != nil || len(resp.Results) != 2 || string(resp.Results[1].Rows[0][0]) != "42" {
		t.Fatalf("result %s (%v)", data, err)
	}
}

func TestBadJobsExitWithStatus2(t *testing.T) {
	for _, in := range []string{"not json", `{"blocks":["SELECT 1"]}`, `{"mode":"drop","result_path":"/tmp/x"}`} {
		var stderr bytes.Buffer
		if code := run(nil, strings.NewReader(in), &stderr, &stderr); code != 2 || stderr.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", in, code, stderr.String())
		}
	}
}

func TestSQLErrorExitsWithStatus1AndTheError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	in, _ := json.Marshal(protocol.Request{Blocks: []string{"SELEC 1"}, ResultPath: path})
	var stderr bytes.Buffer
	if code := run(nil, bytes.NewReader(in), &stderr, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "syntax error") {
		t.Fatalf("result %s", data)
	}
}

func TestManualRunPrintsTheResponse(t *testing.T) {
	var out, stderr bytes.Buffer
	code := run([]string{"run", "--sql", "SELECT 'hand' AS how"}, nil, &out, &stderr)
	if code != 0 || !strings.Contains(out.String(), `"hand"`) {
		t.Fatalf("exit %d\n%s%s", code, out.String(), stderr.String())
	}
}

func TestInstallModeRefusesOtherStatements(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	in, _ := json.Marshal(protocol.Request{Mode: protocol.ModeInstall, Blocks: []string{"COPY (SELECT 1) TO '/tmp/x'"}, ResultPath: path})
	var stderr bytes.Buffer
	if code := run(nil, bytes.NewReader(in), &stderr, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "install mode runs only") {
		t.Fatalf("result %s", data)
	}
}
