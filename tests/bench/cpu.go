package main

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// CPU accounting from /proc: user+system time of this process (the load generator), of the
// worker subprocess and of every PostgreSQL process, the latter split by what the session is.

const clockTicks = 100 // USER_HZ on Linux

// procTicks returns utime+stime and the parent pid of a process.
func procTicks(pid int) (ticks int64, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st, ppid, true
}

// cpuSnap maps pid to CPU ticks, for this process, the worker and postgres' processes.
type cpuSnap map[int]int64

func snapCPU(postmaster, worker int) cpuSnap {
	s := cpuSnap{}
	for _, pid := range []int{os.Getpid(), worker, postmaster} {
		if t, _, ok := procTicks(pid); ok {
			s[pid] = t
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if t, ppid, ok := procTicks(pid); ok && ppid == postmaster && postmaster != 0 {
			s[pid] = t
		}
	}
	return s
}

func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// CPU categories, in display order.
var cpuCategories = []string{"load generator", "worker process", "PG client sessions", "PG worker sessions", "PG walsender", "PG other"}

// pgSessionKinds maps backend pids to a category, from pg_stat_activity; labels has every
// process's backend_type/application_name (for -debug output).
func pgSessionKinds(ctx context.Context, dsn string) (out, labels map[int]string) {
	out, labels = map[int]string{}, map[int]string{}
	conn, err := connect(ctx, dsn, appMonitor)
	if err != nil {
		return out, labels
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT pid, backend_type, coalesce(application_name, '') FROM pg_stat_activity`)
	if err != nil {
		return out, labels
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var typ, app string
		if rows.Scan(&pid, &typ, &app) != nil {
			continue
		}
		labels[pid] = typ + "/" + app
		switch {
		case typ == "walsender":
			out[pid] = "PG walsender"
		case typ == "client backend" && app == appClient:
			out[pid] = "PG client sessions"
		case typ == "client backend" && app != appMonitor:
			out[pid] = "PG worker sessions"
		}
	}
	return out, labels
}

// debugCPU prints the processes that used the most CPU between a and b.
func debugCPU(env *Env, name string, a, b cpuSnap, labels map[int]string) {
	type row struct {
		pid   int
		ticks int64
	}
	var rows []row
	for pid, t := range b {
		rows = append(rows, row{pid, t - a[pid]})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ticks > rows[j].ticks })
	for _, r := range rows[:min(len(rows), 12)] {
		env.Progress("cpu %s: pid %d %s: %d ms (new: %v)", name, r.pid, labels[r.pid], r.ticks*1000/clockTicks, a[r.pid] == 0)
	}
}

// cpuDelta is the CPU time per category between two snapshots.
func cpuDelta(a, b cpuSnap, worker int, kinds map[int]string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, tb := range b {
		d := time.Duration(tb-a[pid]) * time.Second / clockTicks
		switch {
		case pid == os.Getpid():
			out["load generator"] += d
		case pid == worker:
			out["worker process"] += d
		case kinds[pid] != "":
			out[kinds[pid]] += d
		default:
			out["PG other"] += d
		}
	}
	return out
}

// machineCPU is the whole machine's CPU time from /proc/stat: busy (not idle or iowait) and
// capacity (all CPUs × wall time); ours is what the benchmark's processes used, when known.
type machineCPU struct {
	busy, total, ours time.Duration
}

func readMachineCPU() machineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var m machineCPU
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		d := time.Duration(n) * time.Second / clockTicks
		if i >= 8 { // guest time is already in user
			break
		}
		m.total += d
		if i != 3 && i != 4 { // idle, iowait
			m.busy += d
		}
	}
	return m
}

func (m machineCPU) sub(o machineCPU) machineCPU {
	return machineCPU{busy: m.busy - o.busy, total: m.total - o.total, ours: m.ours - o.ours}
}

func (m *machineCPU) add(o machineCPU) {
	m.busy, m.total, m.ours = m.busy+o.busy, m.total+o.total, m.ours+o.ours
}

// since is the CPU time used by the processes of s since a.
func (s cpuSnap) since(a cpuSnap) time.Duration {
	var d int64
	for pid, t := range s {
		d += t - a[pid]
	}
	return time.Duration(d) * time.Second / clockTicks
}

// otherShare is the share of the machine's CPU capacity used by processes other than ours.
func (m machineCPU) otherShare() float64 {
	if m.total == 0 {
		return 0
	}
	return max(0, float64(m.busy-m.ours)/float64(m.total))
}
