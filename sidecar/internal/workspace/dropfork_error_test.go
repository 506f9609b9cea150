package workspace

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// TestPartialDropErrorIsTransientOnlyWhenEveryPartIs: a drop_fork that left something behind
// because of faults another attempt cures (a lost leadership, a terminated session) is retried;
// one final part (a refusal) fails it with the text of every part.
func TestPartialDropErrorIsTransientOnlyWhenEveryPartIs(t *testing.T) {
	lostLead := request.Retryable(errors.New("fence cluster \"ext\": this sidecar no longer holds the leader lock"))
	killed := fmt.Errorf("drop database: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})
	refused := request.Refusef("database d is in use")
	copyFail := func(err error) copyFailure {
		return copyFailure{Copy: Copy{Cluster: "ext", Database: "dataenv_fork_x_crm_00000000"}, Error: err.Error(), err: err}
	}
	if err := partialDropError("f", nil, nil); err != nil {
		t.Fatalf("nothing failed, got %v", err)
	}
	cases := []struct {
		name      string
		failed    []copyFailure
		cleanup   []error
		transient bool
	}{
		{"a copy, lost leadership", []copyFailure{copyFail(lostLead)}, nil, true},
		{"a copy and a cleanup, both transient", []copyFailure{copyFail(killed)}, []error{fmt.Errorf("workspace f: %w", lostLead)}, true},
		{"a refused copy", []copyFailure{copyFail(killed), copyFail(refused)}, nil, false},
		{"a refused cleanup", nil, []error{fmt.Errorf("workspace f: %w", refused)}, false},
	}
	for _, c := range cases {
		err := partialDropError("f", c.failed, c.cleanup)
		if err == nil || request.IsTransient(err) != c.transient {
			t.Errorf("%s: %v: transient = %v, want %v", c.name, err, request.IsTransient(err), c.transient)
			continue
		}
		if !strings.Contains(err.Error(), "run dataenv.drop_fork again") {
			t.Errorf("%s: %q does not say what to do", c.name, err)
		}
	}
}
