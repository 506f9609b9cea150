// Package devtest runs the real `dataenv dev` as a user would (tests/sidecartest builds the
// binary), reads its banner, and stops it with SIGINT at the test's cleanup.
package devtest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dataenv/dataenv/tests/sidecartest"
	"github.com/dataenv/dataenv/tests/testenv"
)

// Process is a running `dataenv dev`.
type Process struct {
	Cmd  *exec.Cmd
	Out  *testenv.LogBuffer // everything it printed (stdout and stderr)
	DSN  string             // from the banner's psql line
	Addr string             // from the banner's Metrics line
	done chan struct{}
	// lines gets the stdout lines while Start waits for the banner.
	lines chan string
}

var (
	psqlRE    = regexp.MustCompile(`psql '([^']+)'`)
	metricsRE = regexp.MustCompile(`Metrics: http://([^/]+)/metrics`)
)

// Start runs dataenv dev --dir dir args... and waits (up to 3 minutes) for its banner, which it
// prints once the instance is prepared.
func Start(t *testing.T, dir string, args ...string) *Process {
	t.Helper()
	p := Run(t, dir, args...)
	deadline := time.After(3 * time.Minute)
	for p.DSN == "" || p.Addr == "" {
		select {
		case l := <-p.lines:
			if m := psqlRE.FindStringSubmatch(l); m != nil && p.DSN == "" {
				p.DSN = m[1]
			}
			if m := metricsRE.FindStringSubmatch(l); m != nil {
				p.Addr = m[1]
			}
		case <-p.done:
			t.Fatalf("dataenv dev exited: %v\n%s", p.Cmd.ProcessState, p.Out.String())
		case <-deadline:
			t.Fatalf("no banner from dataenv dev:\n%s", p.Out.String())
		}
	}
	return p
}

// Run starts dataenv dev and returns at once; it is stopped with SIGINT at cleanup.
func Run(t *testing.T, dir string, args ...string) *Process {
	t.Helper()
	bin, err := sidecartest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"dev", "--dir", dir, "--log-level", "warn"}, args...)...)
	cmd.Env = withoutDataenvEnv()
	p := &Process{Cmd: cmd, Out: &testenv.LogBuffer{}, done: make(chan struct{}), lines: make(chan string, 100)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.Out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stdout, p.Out))
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Stop sends SIGINT (Ctrl-C) and waits for the process to exit.
func (p *Process) Stop(t *testing.T) {
	_ = p.Cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(90 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
		t.Errorf("dataenv dev ignored SIGINT for 90 s:\n%s", p.Out.String())
	}
}

// ExitText waits for the process to exit by itself and returns what it printed.
func (p *Process) ExitText(t *testing.T) string {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("dataenv dev did not exit:\n%s", p.Out.String())
	}
	return p.Out.String()
}

// withoutDataenvEnv is the test's environment without the settings a user would not have set
// (DATAENV_RUNNER_PATH stays: the tests build the runner elsewhere).
func withoutDataenvEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATAENV_HTTP_ADDR=") && !strings.HasPrefix(kv, "DATAENV_DSN=") {
			env = append(env, kv)
		}
	}
	return env
}

// RemoveRelocated deletes a cluster dev put outside dir (root under a 0700 parent). Register it
// with t.Cleanup before starting the instances, so that it runs after they stopped.
func RemoveRelocated(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "pg-location"))
	if err != nil {
		return
	}
	pgDir := strings.TrimSpace(string(b))
	if strings.HasPrefix(pgDir, "/var/lib/dataenv/dev/") {
		_ = os.RemoveAll(filepath.Dir(pgDir))
	}
}
