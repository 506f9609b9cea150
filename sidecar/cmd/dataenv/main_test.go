package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, c := range commands() {
		if !strings.Contains(out.String(), c.name) {
			t.Errorf("--help does not list %q:\n%s", c.name, out.String())
		}
	}
}

func TestBadInvocationsSayWhatIsWrong(t *testing.T) {
	t.Setenv("DATAENV_DSN", "")
	cases := map[string][]string{
		`unknown command "bogus"`:            {"bogus"},
		"--dsn (or DATAENV_DSN) is required": {"install"},
		"flag provided but not defined":      {"sidecar", "--no-such-flag"},
		"--satellite-idle-timeout":           {"sidecar", "--dsn", "postgres://x/y", "--satellite-idle-timeout", "soon"},
	}
	for want, args := range cases {
		err := run(context.Background(), args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("dataenv %v: err = %v, want it to say %q", args, err, want)
		}
	}
}
