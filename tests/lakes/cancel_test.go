package lakes_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// descendants lists the live processes below pid (through /proc, following parent links).
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		p, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(fields[1])
		parent[p] = pp
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// dataenv.cancel on a running DuckDB job kills the runner's whole process group: the request
// ends cancelled and no process of the job survives.
func TestCancelRunningJobKillsTheRunner(t *testing.T) {
	e := newEnv(t)
	e.startSidecar("DATAENV_JOB_WARM_SPARES=0") // so that every process under the sidecar is the job's
	e.workspace("prod", "")
	var id uuid.UUID
	long := `SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3`
	if err := e.conn.QueryRow(context.Background(), `SELECT dataenv.run('prod', $1)`, long).Scan(&id); err != nil {
		t.Fatal(err)
	}
	sidecarPid := e.sidecar.Pid()
	deadline := time.Now().Add(60 * time.Second)
	for len(descendants(sidecarPid)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no runner process appeared under the sidecar")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustExec(t, e.conn, `SELECT dataenv.cancel($1)`, id)
	row := e.wait(id)
	if row.Status != "cancelled" {
		t.Fatalf("the cancelled job is %s (%s)", row.Status, deref(row.Error))
	}
	deadline = time.Now().Add(5 * time.Second)
	for len(descendants(sidecarPid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the cancelled job still alive: %v", descendants(sidecarPid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := e.run("prod", `SELECT 42 AS answer`); len(r.Rows) != 1 {
		t.Fatalf("the next job after a cancel: %+v", r)
	}
}
