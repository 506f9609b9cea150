package pgsession

import (
	"strings"
	"testing"
)

func TestOptionsEscapesBlanks(t *testing.T) {
	got := Options()
	for _, want := range []string{`-c search_path=pg_catalog,\ pg_temp`, `-c role=none`, `-c default_transaction_isolation=read\ committed`} {
		if !strings.Contains(got, want) {
			t.Errorf("Options() = %q, want it to contain %q", got, want)
		}
	}
}

func TestPinReplacesTheConnectionString(t *testing.T) {
	params := map[string]string{"role": "someone", "application_name": "x"}
	Pin(params)
	if params["role"] != "none" || params["application_name"] != "x" || params["statement_timeout"] != "0" {
		t.Errorf("Pin left %v", params)
	}
}
