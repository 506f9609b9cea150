package testenv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The cleanup tests re-run this test binary as a child with childModeEnv set. The child's
// TestMain starts the package's components as usual, TestChild records their processes and
// directories in a report file and then ends badly (a failure, a panic, a signal). The parent
// checks that nothing survived.
const (
	childModeEnv   = "DATAENV_TESTENV_CHILD_MODE"
	childReportEnv = "DATAENV_TESTENV_CHILD_REPORT"
)

type childReport struct {
	PIDs []int
	Dirs []string
}

// TestChild is the child's side: it does nothing unless run by the cleanup tests.
func TestChild(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		return
	}
	// An open connection at the end: its backend must go too.
	conn := control.Connect(t, control.CreateDatabase(t))
	rep := childReport{
		PIDs: []int{control.Cluster.PID(), external.Cluster.PID(), s3.PID(), int(conn.PgConn().PID())},
		Dirs: []string{control.Cluster.Dir, external.Cluster.Dir, s3.Dir},
	}
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(os.Getenv(childReportEnv), b, 0o600); err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "fail":
		t.Fatal("deliberate failure")
	case "panic":
		panic("deliberate panic in a test goroutine")
	case "sigterm":
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(time.Minute) // Main's signal handler exits the process meanwhile
	}
}

func TestCleanupAfterFailingTest(t *testing.T) { checkChildCleanup(t, "fail", false) }

// A panic in a test goroutine kills the process before any deferred Go code can run: the
// procguard guards remove the processes and directories after the process is gone.
func TestCleanupAfterPanic(t *testing.T) { checkChildCleanup(t, "panic", true) }

func TestCleanupAfterSIGTERM(t *testing.T) { checkChildCleanup(t, "sigterm", false) }

func checkChildCleanup(t *testing.T, mode string, eventually bool) {
	if control.Docker {
		t.Skip("checks local processes and directories; Docker containers are removed by testcontainers")
	}
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childReportEnv+"="+report)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("child in mode %s: want a non-zero exit, got %v\n%s", mode, err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("child wrote no report: %v\n%s", err, out)
	}
	var rep childReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.PIDs) != 4 || len(rep.Dirs) != 3 {
		t.Fatalf("bad report %+v", rep)
	}
	// After a clean Main the state must be gone when the child exits; after a crash the guards
	// finish shortly after it.
	deadline := time.Now()
	if eventually {
		deadline = deadline.Add(30 * time.Second)
	}
	for {
		left := leftovers(rep)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the child (mode %s) ended: %s\nchild output:\n%s", mode,
				strings.Join(left, "; "), out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func leftovers(rep childReport) []string {
	var left []string
	for _, pid := range rep.PIDs {
		if alive(pid) {
			left = append(left, fmt.Sprintf("process %d alive", pid))
		}
	}
	for _, dir := range rep.Dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			left = append(left, fmt.Sprintf("directory %s exists (%v)", dir, err))
		}
	}
	return left
}

// alive reports whether pid runs (a zombie waiting for init to reap it counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
