package client

import (
	"fmt"
	"os/exec"
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

// jailTool returns the jail program to use: nsjail when present, else bwrap.
func jailTool() (name, path string, err error) {
	for _, n := range []string{"nsjail", "bwrap"} {
		if p, err := exec.LookPath(n); err == nil {
			return n, p, nil
		}
	}
	return "", "", fmt.Errorf("jailed DuckDB jobs need nsjail or bubblewrap: " +
		"apt-get install bubblewrap (make deps does), or choose isolation unshare or plain")
}

// resolve decides the isolation of one job.
func resolve(job, cfg Isolation) (Isolation, error) {
	m := job
	if m == IsolationAuto {
		m = cfg
	}
	switch m {
	case IsolationAuto:
		if _, _, err := jailTool(); err == nil {
			return IsolationJailed, nil
		}
		return IsolationPlain, nil
	case IsolationJailed:
		_, _, err := jailTool()
		return m, err
	case IsolationUnshare, IsolationPlain:
		return m, nil
	default:
		return m, fmt.Errorf("isolation %q: want jailed, unshare or plain", m)
	}
}
