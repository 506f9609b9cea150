package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

// stats are the counts of one row of a report table.
type stats struct {
	Injected   int
	Requests   int
	Lost       int
	Failed     int
	Duplicated int
	Mismatch   int
	Leftovers  int
	Recovery   []time.Duration // fault to the request's outcome
}

func (s *stats) count(r *record) {
	for _, p := range r.Problems {
		switch p.Class {
		case probLost:
			s.Lost++
		case probFailed:
			s.Failed++
		case probDuplicated:
			s.Duplicated++
		case probMismatch:
			s.Mismatch++
		case probLeftover:
			s.Leftovers++
		}
	}
}

func (s *stats) bad() int { return s.Lost + s.Failed + s.Duplicated + s.Mismatch + s.Leftovers }

// Report is the outcome of a chaos run.
type Report struct {
	Opts                        Options
	Started, FaultsEnded, Ended time.Time
	PGVersion                   string
	Kills                       int
	ByClass                     map[string]*stats
	ByKind                      map[string]*stats
	Total                       stats
	Takeovers                   map[string][]time.Duration
	Unowned                     []string
	Logs                        map[string]int
	Problems                    []string // details, for the report and the test log
	RequestsByStatus            map[string]int
	MaxAttempts                 int
	Affected, Unaffected        int
	SelfExits                   int // sidecars that exited on their own
	// Redumped counts the schema_only forks whose copy was restored from a dump (the parent's
	// schema had changed since its template was built, or the template was being rebuilt).
	Redumped int
}

// logNeedles are sidecar log lines the report counts.
var logNeedles = []string{
	"rescued a request no worker held",
	"ended sessions of earlier attempts",
	"ended the control-database sessions of earlier leaders",
	"an earlier attempt is still finishing",
	"request hit a transient fault; retrying",
	"request moved on; letting it go",
	"request claim keeps matching no row",
	"panic:",
	"fatal error:",
}

func (h *harness) report(started, faultsEnded, ended time.Time, unowned []string) *Report {
	rep := &Report{Opts: h.opts, Started: started, FaultsEnded: faultsEnded, Ended: ended, PGVersion: h.pgVersion(),
		ByClass: map[string]*stats{}, ByKind: map[string]*stats{}, Unowned: unowned,
		Logs: h.sc.scanLogs(logNeedles...), RequestsByStatus: map[string]int{},
		SelfExits: h.sc.exitedOnTheirOwn()}
	if err := h.queryDB(context.Background(), controlDB, `SELECT count(DISTINCT r.id)::int FROM dataenv.requests r, jsonb_array_elements(r.steps) s
		WHERE r.kind = 'create_fork' AND s->>'name' LIKE 'copy datatable % (schema_only)' AND s->>'status' = 'done'
		  AND s->>'detail' LIKE '% by dump in %'`, nil, &rep.Redumped); err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("count the schema_only forks restored from a dump: %v", err))
	}
	for _, c := range faultClasses {
		rep.ByClass[c] = &stats{}
	}
	for _, f := range h.faults.all() {
		rep.ByClass[f.Class].Injected++
		if f.Class == faultKillRestart || f.Class == faultKillTakeover {
			rep.Kills++
		}
	}
	h.faults.mu.Lock()
	rep.Takeovers = h.faults.takeovers
	h.faults.mu.Unlock()
	h.recs.mu.Lock()
	defer h.recs.mu.Unlock()
	for _, r := range h.recs.recs {
		rep.add(h, r)
	}
	for _, u := range unowned {
		rep.Problems = append(rep.Problems, "leftover of no known request: "+u)
	}
	return rep
}

func (rep *Report) add(h *harness, r *record) {
	k := rep.ByKind[r.Kind]
	if k == nil {
		k = &stats{}
		rep.ByKind[r.Kind] = k
	}
	k.Requests++
	rep.Total.Requests++
	rep.RequestsByStatus[r.Row.Status]++
	rep.MaxAttempts = max(rep.MaxAttempts, r.Row.Attempts)
	k.count(r)
	rep.Total.count(r)
	end := time.Now()
	if r.Row.FinishedAt != nil {
		end = *r.Row.FinishedAt
	}
	if f, ok := h.faults.lastBefore(r.Row.CreatedAt, end); ok {
		rep.Affected++
		c := rep.ByClass[f.Class]
		c.Requests++
		c.count(r)
		if r.Row.FinishedAt != nil {
			d := r.Row.FinishedAt.Sub(f.At)
			c.Recovery = append(c.Recovery, d)
			k.Recovery = append(k.Recovery, d)
			rep.Total.Recovery = append(rep.Total.Recovery, d)
		}
	} else {
		rep.Unaffected++
	}
	for _, p := range r.Problems {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s %s (%s, lane %s): %s: %s", r.Kind, r.ID, r.Row.Status, r.Lane, p.Class, p.Detail))
	}
}

// Clean reports whether the run found nothing wrong.
func (rep *Report) Clean() bool {
	return rep.Total.bad() == 0 && len(rep.Unowned) == 0 && rep.Logs["panic:"] == 0 && rep.Logs["fatal error:"] == 0 &&
		rep.SelfExits == 0
}

// Summary is one line for the log.
func (rep *Report) Summary() string {
	return fmt.Sprintf("%d leader kills, %d faults, %d requests: %d lost, %d failed by a fault, %d duplicated, %d mismatched, %d leftovers, %d sidecars exited on their own; %s",
		rep.Kills, rep.faults(), rep.Total.Requests, rep.Total.Lost, rep.Total.Failed, rep.Total.Duplicated,
		rep.Total.Mismatch, rep.Total.Leftovers+len(rep.Unowned), rep.SelfExits, rep.Ended.Sub(rep.Started).Round(time.Second))
}

func (rep *Report) faults() int {
	n := 0
	for _, s := range rep.ByClass {
		n += s.Injected
	}
	return n
}

// Markdown renders RELIABILITY.md.
func (rep *Report) Markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Reliability\n\n")
	w("Generated by `make chaos` (`go run ./tests/chaos`, see tests/chaos/main.go); do not edit by hand.\n")
	w("The harness runs every claimed request kind concurrently against the shipped `dataenv` binary on a\n")
	w("CPU-contended machine while it injects faults, then checks every request and every effect.\n\n")
	w("- Machine: %s; %s; %d CPU hogs at nice 5; seed %d.\n", machine(), rep.PGVersion, rep.Opts.Hogs, rep.Opts.Seed)
	w("- Faults for %s, then %s for the workload to finish; %d leader kills among %d faults.\n",
		rep.FaultsEnded.Sub(rep.Started).Round(time.Second), rep.Ended.Sub(rep.FaultsEnded).Round(time.Second), rep.Kills, rep.faults())
	w("- %d requests (%s); %d finished after at least one fault struck while they were unfinished; highest attempt number %d.\n",
		rep.Total.Requests, rep.statuses(), rep.Affected, rep.MaxAttempts)
	verdict := "**clean**: every request finished, none failed because of a fault, every effect exactly once, nothing left behind"
	if !rep.Clean() {
		verdict = "**NOT clean**: see the problems below"
	}
	w("- Result: %d lost, %d failed by a fault, %d duplicated, %d mismatched effects, %d leftovers, %d sidecars exited on their own: %s.\n\n",
		rep.Total.Lost, rep.Total.Failed, rep.Total.Duplicated, rep.Total.Mismatch, rep.Total.Leftovers+len(rep.Unowned), rep.SelfExits, verdict)
	w("Workload, in 7 concurrent lanes: create_database then drop_database (two lanes); create_datatable_role then\n")
	w("drop_datatable_role; setup_cluster in a loop; create_fork cycling keep_original, schema_only and full_copy\n")
	w("with the lake isolated, a run that reads the parent's lake table through the fork, two materialize appends\n")
	w("and a run that counts them (exactly once), reset_fork of each schema_only fork (its copy takes the\n")
	w("template's spare though the fork's role exists), a change of the parent's schema (a comment) before every\n")
	w("other schema_only fork (its copy is restored from a dump and its request rebuilds the template; schema_only\n")
	w("forks of this run restored from a dump: %d), a child fork every third time, drop_fork with cascade (two\n", rep.Redumped)
	w("lanes); and dataenv.cancel of a long DuckDB run or a sleeping ping at a random moment (cancelled or\n")
	w("succeeded both count as correct). Each effect is checked right after its request, and at the end the\n")
	w("harness looks for staging databases, fork databases, schemas, data files, roles, records and workspaces\n")
	w("that should not exist.\n\n")
	w("A request is counted under the last fault injected while it was unfinished; its recovery time is from\n")
	w("that fault to its outcome (finished_at).\n\n")
	w("## Per fault class\n\n")
	rep.table(&b, "fault class", faultClasses, rep.ByClass, true)
	w("\n## Per request kind\n\n")
	kinds := make([]string, 0, len(rep.ByKind))
	for k := range rep.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	rep.table(&b, "kind", kinds, rep.ByKind, false)
	w("| **all** | %d | %d | %d | %d | %d | %d | %s | %s |\n", rep.Total.Requests, rep.Total.Lost, rep.Total.Failed,
		rep.Total.Duplicated, rep.Total.Mismatch, rep.Total.Leftovers, pct(rep.Total.Recovery, 50), pct(rep.Total.Recovery, 99))
	w("\n## Leader takeover\n\nTime from the SIGKILL of the leader to a new leader streaming from the slot (kills followed by\nanother fault before that are left out).\n\n")
	w("| after | takeovers | p50 | p99 | max |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, c := range []string{faultKillRestart, faultKillTakeover} {
		d := rep.Takeovers[c]
		w("| %s | %d | %s | %s | %s |\n", c, len(d), pct(d, 50), pct(d, 99), pct(d, 100))
	}
	w("\n## What the sidecars logged\n\n| log line | count |\n| --- | ---: |\n")
	for _, n := range logNeedles {
		w("| `%s` | %d |\n", n, rep.Logs[n])
	}
	if len(rep.Problems) > 0 {
		w("\n## Problems\n\n")
		for i, p := range rep.Problems {
			if i == 200 {
				w("- ... and %d more\n", len(rep.Problems)-200)
				break
			}
			w("- %s\n", p)
		}
	}
	return b.String()
}

func (rep *Report) table(b *strings.Builder, first string, rows []string, by map[string]*stats, injected bool) {
	head, sep := "| "+first+" |", "| --- |"
	if injected {
		head, sep = head+" injected |", sep+" ---: |"
	}
	fmt.Fprintf(b, "%s requests | lost | failed by a fault | duplicated | mismatched | leftovers | recovery p50 | recovery p99 |\n", head)
	fmt.Fprintf(b, "%s ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n", sep)
	for _, r := range rows {
		s := by[r]
		inj := ""
		if injected {
			inj = fmt.Sprintf(" %d |", s.Injected)
		}
		fmt.Fprintf(b, "| %s |%s %d | %d | %d | %d | %d | %d | %s | %s |\n", r, inj, s.Requests, s.Lost, s.Failed,
			s.Duplicated, s.Mismatch, s.Leftovers, pct(s.Recovery, 50), pct(s.Recovery, 99))
	}
}

func (rep *Report) statuses() string {
	var parts []string
	for _, s := range []string{"succeeded", "cancelled", "failed", "running", "pending"} {
		if n := rep.RequestsByStatus[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

// pct is the p-th percentile (nearest rank), "–" without data.
func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "–"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := max((p*len(s)+99)/100-1, 0)
	return round(s[min(i, len(s)-1)])
}

func round(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

func (h *harness) pgVersion() string {
	var v string
	if err := h.queryDB(context.Background(), "postgres", `SELECT 'PostgreSQL ' || current_setting('server_version')`, nil, &v); err != nil {
		return "PostgreSQL"
	}
	return v
}

func machine() string {
	model := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := runtime.GOOS
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d CPUs (%s), %s, %s", runtime.NumCPU(), model, kernel, runtime.Version())
}
