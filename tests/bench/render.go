package main

import (
	"fmt"
	"strings"
	"time"
)

func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f < 10:
		return fmt.Sprintf("%.2f", f)
	case f < 100:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.0f", f)
	}
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func renderPipeline(env *Env, cfg pipelineConfig, rs []*targetResult, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Request pipeline: commit → outcome committed (suite `pipeline`)\n\n")
	w("Measured on %s; the suite took %s.", env.Machine(), took.Round(time.Second))
	if env.Quick {
		w(" **Quick run (-quick): short phases, not for comparison.**")
	}
	w("\n\n")
	renderVerdict(w, rs)
	renderRates(w, cfg, rs)
	renderRatios(w, cfg, rs)
	renderThroughput(w, cfg, rs)
	renderSplit(w, rs)
	renderStatements(w, rs)
	w("%s", pipelineMethod)
	return b.String()
}

func renderVerdict(w func(string, ...any), rs []*targetResult) {
	d := rs[0]
	var bestRiver float64
	var worsePooled, worseMedian, saturated []string
	dt := d.tput()
	for _, o := range rs[1:] {
		if o.err != nil {
			continue
		}
		for i, rr := range d.rates {
			if i >= len(o.rates) {
				continue
			}
			if o.rates[i].saturated() {
				saturated = append(saturated, fmt.Sprintf("%s cannot take %.0f/s (it achieved %.0f/s)", o.name, rr.rate, o.rates[i].achieved()))
				continue
			}
			at := fmt.Sprintf("%s at %.0f/s", o.name, rr.rate)
			if rr.lat.pct(99) >= o.rates[i].lat.pct(99) {
				worsePooled = append(worsePooled, at)
			}
			if rr.medianRoundP99() >= o.rates[i].medianRoundP99() {
				worseMedian = append(worseMedian, at)
			}
		}
		if ot := o.tput(); strings.HasPrefix(o.name, "River") && ot.completed > bestRiver {
			bestRiver = ot.completed
		}
	}
	verdict := func(worse []string) string {
		if len(worse) == 0 {
			return "met"
		}
		return "**missed** (not lower than " + strings.Join(worse, ", ") + ")"
	}
	w("**Targets (issue 3).** Lower p99 latency than every baseline at every offered rate: pooled p99 %s; median of the rounds' p99 %s", verdict(worsePooled), verdict(worseMedian))
	if len(saturated) > 0 {
		w("; not compared where the baseline could not take the offered rate: %s", strings.Join(saturated, ", "))
	}
	mark := map[bool]string{true: "met", false: "**missed**"}
	if bestRiver == 0 {
		w(". At least River's throughput: not measured (no River result).\n\n")
	} else {
		w(". At least River's throughput: %s (dataenv %.0f/s, best River configuration %.0f/s).\n\n", mark[dt.completed >= bestRiver], dt.completed, bestRiver)
	}
	for _, o := range rs {
		if o.err != nil {
			w("- %s failed: %v\n", o.name, o.err)
		}
	}
}

func renderRates(w func(string, ...any), cfg pipelineConfig, rs []*targetResult) {
	w("### Latency at a fixed offered rate\n\n")
	w("Open loop: arrivals evenly spaced at the offered rate over %d client connections, %s per rate in each of %d rounds (latencies pooled). Latency: from the insert's commit returning to the client until the client learns that the outcome is committed. \"Saturated\": the clients could not even insert at 90%% of the offered rate, so that row's latency is at a lower rate. \"p99 by round\": each round's own p99, in round order; a burst of other work on this shared machine shows up as one outlying round.\n\n", cfg.clients, cfg.rateDur, cfg.rounds)
	w("| system | offered/s | achieved/s | p50 ms | p90 ms | p99 ms | max ms | p99 by round ms | completed | not completed |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range cfg.rates {
		for _, r := range rs {
			for _, rr := range r.rates {
				if rr.rate != rate || rr.submitted == 0 {
					continue
				}
				sat := ""
				if rr.saturated() {
					sat = " (saturated)"
				}
				var rounds []string
				for _, p := range rr.roundP99 {
					rounds = append(rounds, ms(p))
				}
				w("| %s | %.0f | %.0f%s | %s | %s | %s | %s | %s | %d | %d |\n", r.name, rr.rate, rr.achieved(), sat,
					ms(rr.lat.pct(50)), ms(rr.lat.pct(90)), ms(rr.lat.pct(99)), ms(rr.lat.pct(100)), strings.Join(rounds, " / "), len(rr.lat), rr.missing)
			}
		}
	}
	w("\n")
}

func renderRatios(w func(string, ...any), cfg pipelineConfig, rs []*targetResult) {
	d := rs[0]
	w("### Ratios: dataenv / baseline\n\nLatency and CPU ratios below 1 and throughput ratios above 1 favour dataenv; \"p99 rounds\" compares the medians of the rounds' p99s.\n\n| baseline |")
	for _, rate := range cfg.rates {
		w(" p50 @%.0f/s | p99 @%.0f/s | p99 rounds @%.0f/s |", rate, rate, rate)
	}
	w(" max throughput | CPU per request |\n|---|")
	for range cfg.rates {
		w("---:|---:|---:|")
	}
	w("---:|---:|\n")
	dt := d.tput()
	for _, o := range rs[1:] {
		if o.err != nil {
			continue
		}
		w("| %s |", o.name)
		for i := range cfg.rates {
			if i >= len(d.rates) || i >= len(o.rates) {
				w(" n/a | n/a | n/a |")
				continue
			}
			sat := ""
			if o.rates[i].saturated() {
				sat = " (baseline saturated)"
			}
			dr, or := &d.rates[i], &o.rates[i]
			w(" %s%s | %s%s | %s%s |", ratio(float64(dr.lat.pct(50)), float64(or.lat.pct(50))), sat,
				ratio(float64(dr.lat.pct(99)), float64(or.lat.pct(99))), sat,
				ratio(float64(dr.medianRoundP99()), float64(or.medianRoundP99())), sat)
		}
		ot := o.tput()
		w(" %s | %s |\n", ratio(dt.completed, ot.completed), ratio(dt.cpuPerRequest(), ot.cpuPerRequest()))
	}
	w("\n")
}

func renderThroughput(w func(string, ...any), cfg pipelineConfig, rs []*targetResult) {
	w("### Maximum sustained throughput\n\n")
	w("Closed loop: %d clients insert as fast as they can while at most %d requests are outstanding (inserted, outcome not yet seen); completions counted over %s after %s of warm-up, in each of %d rounds: the median round, with the range. Everything (load generator, worker, Postgres) shares the same %d CPUs, so CPU per request decides the ceiling.\n\n",
		cfg.clients, cfg.window, cfg.measure, cfg.warm, cfg.rounds, ncpu())
	w("| system | completed/s | inserted/s | p50 ms | p99 ms |")
	for _, c := range cpuCategories {
		w(" %s |", c)
	}
	w(" total CPU | other processes |\n|---|---:|---:|---:|---:|")
	for range cpuCategories {
		w("---:|")
	}
	w("---:|---:|\n")
	for _, r := range rs {
		if r.err != nil {
			continue
		}
		t := r.tput()
		lo, hi := r.tputRange()
		w("| %s | %.0f (%.0f–%.0f) | %.0f | %s | %s |", r.name, t.completed, lo, hi, t.inserted, ms(t.lat.pct(50)), ms(t.lat.pct(99)))
		var total time.Duration
		for _, c := range cpuCategories {
			total += t.cpu[c]
			w(" %s |", perReq(t.cpu[c], t.count))
		}
		w(" %s | %.0f%% |\n", perReq(total, t.count), 100*r.busy.otherShare())
	}
	w("\nCPU columns: CPU milliseconds per completed request in the measured window (user+system from /proc; Postgres sessions told apart by application_name and backend_type; \"PG other\" is the postmaster, WAL writer, checkpointer, autovacuum and this program's monitoring session). \"Other processes\": share of the machine's CPU used by processes outside this benchmark during this system's measured phases (open and closed loop); well above 0 means the numbers are disturbed.\n\n")
}

func perReq(d time.Duration, n int) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)/float64(n))
}

func renderSplit(w func(string, ...any), rs []*targetResult) {
	w("### Where the latency goes\n\n")
	w("For the systems whose rows record `finished_at` (set by the outcome UPDATE with `clock_timestamp()`, same clock as the client): commit → outcome UPDATE runs (decode/fetch, dispatch, batching), and outcome UPDATE → client notified (the outcome transaction's commit and the NOTIFY delivery).\n\n")
	w("| system | offered/s | commit → outcome UPDATE p50 / p99 ms | outcome UPDATE → notified p50 / p99 ms |\n|---|---:|---:|---:|\n")
	for _, r := range rs {
		for _, rr := range r.rates {
			if len(rr.toOutcome) == 0 {
				continue
			}
			w("| %s | %.0f | %s / %s | %s / %s |\n", r.name, rr.rate, ms(rr.toOutcome.pct(50)), ms(rr.toOutcome.pct(99)),
				ms(rr.toNotify.pct(50)), ms(rr.toNotify.pct(99)))
		}
	}
	w("\n")
}

func renderStatements(w func(string, ...any), rs []*targetResult) {
	w("<details><summary>Top statements by execution time during the measured closed loop (pg_stat_statements)</summary>\n\n")
	for _, r := range rs {
		stmts := r.tput().stmts
		if r.err != nil || len(stmts) == 0 {
			continue
		}
		w("%s:\n\n| calls | total ms | ms/call | statement |\n|---:|---:|---:|---|\n", r.name)
		for _, s := range stmts {
			w("| %d | %.0f | %.3f | `%s` |\n", s.calls, s.totalMS, s.totalMS/float64(max(s.calls, 1)), s.query)
		}
		w("\n")
	}
	w("</details>\n\n")
}

const pipelineMethod = `### How each system is measured

All four run one after the other against the same throwaway cluster, each in a database of its
own, each consumer in a subprocess of its own (` + "`bench -bench-worker NAME`" + `) so its CPU is
counted apart from the load generator's. Every request is one autocommit transaction; the clock
starts when the client sees its commit return.

- **dataenv**: ` + "`SELECT dataenv.ping()`" + `; the sidecar (` + "`daemon.Run`" + `, default settings: 8
  handlers, batched outcome writes) decodes the insert from logical replication and writes the
  outcome; the client LISTENs on ` + "`dataenv_request_finished`" + `, which the outcome trigger notifies
  with the request id when the outcome commits.
- **LISTEN/NOTIFY + SKIP LOCKED**: a table of the same shape as dataenv.requests; an AFTER INSERT
  trigger notifies the worker, whose 4 connections each, in one transaction, claim up to 100
  pending rows ` + "`FOR UPDATE SKIP LOCKED`" + `, run the no-op handlers and mark them succeeded; the
  same outcome trigger as dataenv's notifies the client, which waits exactly as for dataenv.
- **River** (riverqueue/river v0.51, riverpgxv5): ` + "`client.Insert`" + ` of a job whose worker does
  nothing; the client learns of completion from River's ` + "`job_completed`" + ` event in the worker
  process (River emits it after its batched completion commits), stamped on receipt and passed
  to the load generator over a pipe. River has no completion NOTIFY, and adding one would change
  what is measured. Default: River's fetch defaults (FetchCooldown 100 ms, FetchPollInterval 1 s),
  MaxWorkers 100. Tuned: FetchCooldown 1 ms, FetchPollInterval 5 ms, MaxWorkers 1000. Either way
  River's completer commits completions in batches: every 250 ms, or at its next 50 ms tick
  once 100 are waiting (not configurable; ` + "`JobCompleteTx`" + ` in the worker would bypass it, but
  then the worker is no longer a no-op).
`
