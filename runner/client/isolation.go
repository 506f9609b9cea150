package client

import (
	"fmt"
	"os/exec"
	"strings"
)

// Isolation is how a runner process is confined.
type Isolation string

// Isolation modes.
const (
	// IsolationAuto is IsolationJailed when nsjail or bubblewrap is installed, else
	// IsolationPlain.
	IsolationAuto Isolation = ""
	// IsolationJailed runs the runner in nsjail, else bubblewrap.
	IsolationJailed Isolation = "jailed"
	// IsolationUnshare runs it in its own PID namespace (what `unshare --pid --fork` gives),
	// through clone flags rather than the unshare binary.
	IsolationUnshare Isolation = "unshare"
	// IsolationPlain runs it as a plain child process.
	IsolationPlain Isolation = "plain"
)

// jailTool returns the jail program to use: want when set ("nsjail" or "bwrap"), else nsjail
// when present, else bwrap.
func jailTool(want string) (name, path string, err error) {
	names := []string{"nsjail", "bwrap"}
	switch want {
	case "":
	case "nsjail", "bwrap":
		names = []string{want}
	default:
		return "", "", fmt.Errorf("jail %q: want nsjail or bwrap", want)
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return n, p, nil
		}
	}
	return "", "", fmt.Errorf("jailed DuckDB jobs need %s: apt-get install bubblewrap "+
		"(make deps does), or choose isolation unshare or plain", strings.Join(names, " or "))
}

// resolve decides the isolation of one job.
func resolve(job, cfg Isolation, jail string) (Isolation, error) {
	m := job
	if m == IsolationAuto {
		m = cfg
	}
	switch m {
	case IsolationAuto:
		if _, _, err := jailTool(jail); err == nil {
			return IsolationJailed, nil
		}
		return IsolationPlain, nil
	case IsolationJailed:
		_, _, err := jailTool(jail)
		return m, err
	case IsolationUnshare, IsolationPlain:
		return m, nil
	default:
		return m, fmt.Errorf("isolation %q: want jailed, unshare or plain", m)
	}
}
