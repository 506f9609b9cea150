package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

func init() { Register(&pipelineSuite{}) }

// pipelineSuite measures ping requests from the inserting transaction's commit to the outcome
// being committed, for dataenv and the queues a user would otherwise pick, on the same cluster
// in the same run. The systems take turns in rounds (the order rotating) so that a burst of
// other activity on the machine does not land on one of them only.
type pipelineSuite struct{}

func (*pipelineSuite) Name() string { return "pipeline" }

type pipelineConfig struct {
	rounds  int
	rates   []float64     // open-loop offered rates
	rateDur time.Duration // per rate and round
	clients int           // client connections (open and closed loop)
	window  int           // closed loop: requests outstanding at most
	warm    time.Duration // closed loop: before measuring, per round
	measure time.Duration // closed loop: measured, per round
}

var defaultPipelineConfig = pipelineConfig{rounds: 4, rates: []float64{100, 500, 1000}, rateDur: 3 * time.Second,
	clients: 8, window: 2000, warm: 2 * time.Second, measure: 3 * time.Second}

func (c pipelineConfig) forEnv(env *Env) pipelineConfig {
	if env.Quick {
		c.rounds, c.rateDur, c.warm, c.measure = 1, 2*time.Second, time.Second, 2*time.Second
	}
	return c
}

// pipelineTargets are the systems, dataenv first. BENCH_PIPELINE_TARGETS=dataenv,skiplocked,...
// picks some (development only: the section then lacks baselines).
func pipelineTargets() []target {
	all := map[string]target{"dataenv": newDataenvTarget(), "skiplocked": newSkipLockedTarget(),
		"river-tuned": &riverTarget{worker: "river-tuned"}, "river-default": &riverTarget{worker: "river-default"}}
	names := []string{"dataenv", "skiplocked", "river-tuned", "river-default"}
	if v := os.Getenv("BENCH_PIPELINE_TARGETS"); v != "" {
		names = strings.Split(v, ",")
	}
	var out []target
	for _, n := range names {
		if t, ok := all[n]; ok {
			out = append(out, t)
		}
	}
	return out
}

type rateResult struct {
	rate      float64
	submitted int
	elapsed   time.Duration
	lat       latencies
	missing   int
	late      int
	errors    int
	toOutcome latencies // commit → finished_at stamped by the outcome UPDATE (stamper targets)
	toNotify  latencies // finished_at → completion received
	roundP99  []time.Duration
}

func (r *rateResult) add(o rateResult) {
	r.rate = o.rate
	r.submitted += o.submitted
	r.elapsed += o.elapsed
	r.lat = append(r.lat, o.lat...)
	r.roundP99 = append(r.roundP99, o.lat.pct(99))
	r.missing += o.missing
	r.late += o.late
	r.errors += o.errors
	r.toOutcome = append(r.toOutcome, o.toOutcome...)
	r.toNotify = append(r.toNotify, o.toNotify...)
}

// medianRoundP99 is the median of the rounds' p99s: a burst of other work on the machine during
// one round moves it less than the pooled p99.
func (r *rateResult) medianRoundP99() time.Duration {
	s := slices.Clone(r.roundP99)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// saturated: the system could not even take 90% of the offered rate.
func (r *rateResult) saturated() bool { return r.achieved() < 0.9*r.rate }

func (r *rateResult) achieved() float64 {
	if r.elapsed == 0 {
		return 0
	}
	return float64(r.submitted) / r.elapsed.Seconds()
}

type tputResult struct {
	completed float64 // per second, in the measured window
	inserted  float64
	lat       latencies
	cpu       map[string]time.Duration
	count     int // completions in the window
	stmts     []stmtStat
	busy      machineCPU
}

// cpuPerRequest is the CPU time of every process of the benchmark per completed request.
func (t tputResult) cpuPerRequest() float64 {
	if t.count == 0 {
		return 0
	}
	var total time.Duration
	for _, d := range t.cpu {
		total += d
	}
	return float64(total) / float64(t.count)
}

type targetResult struct {
	name  string
	rates []rateResult
	tputs []tputResult
	busy  machineCPU // whole machine during this system's measured phases
	err   error
}

// tput aggregates the rounds: the median round's throughput, pooled latencies, summed CPU.
func (r *targetResult) tput() tputResult {
	var agg tputResult
	agg.cpu = map[string]time.Duration{}
	var completed, inserted []float64
	stmts := map[string]*stmtStat{}
	for _, t := range r.tputs {
		completed, inserted = append(completed, t.completed), append(inserted, t.inserted)
		agg.lat = append(agg.lat, t.lat...)
		agg.count += t.count
		for k, v := range t.cpu {
			agg.cpu[k] += v
		}
		for _, s := range t.stmts {
			if m, ok := stmts[s.query]; ok {
				m.calls, m.totalMS = m.calls+s.calls, m.totalMS+s.totalMS
			} else {
				c := s
				stmts[s.query] = &c
			}
		}
	}
	agg.completed, agg.inserted = median(completed), median(inserted)
	slices.Sort(agg.lat)
	for _, s := range stmts {
		agg.stmts = append(agg.stmts, *s)
	}
	sort.Slice(agg.stmts, func(i, j int) bool { return agg.stmts[i].totalMS > agg.stmts[j].totalMS })
	agg.stmts = agg.stmts[:min(len(agg.stmts), 6)]
	return agg
}

func (r *targetResult) tputRange() (lo, hi float64) {
	for i, t := range r.tputs {
		if i == 0 || t.completed < lo {
			lo = t.completed
		}
		hi = max(hi, t.completed)
	}
	return lo, hi
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func (s *pipelineSuite) Run(ctx context.Context, env *Env) (string, error) {
	cfg := defaultPipelineConfig.forEnv(env)
	pg, err := env.Postgres(ctx)
	if err != nil {
		return "", err
	}
	begun := time.Now()
	targets := pipelineTargets()
	results := make([]*targetResult, len(targets))
	for i, t := range targets {
		results[i] = &targetResult{name: t.Name(), rates: make([]rateResult, len(cfg.rates))}
		env.Progress("pipeline: preparing %s", t.Name())
		results[i].err = t.Prepare(ctx, env)
	}
	for round := range cfg.rounds {
		for j := range targets {
			i := (j + round) % len(targets)
			if results[i].err != nil {
				continue
			}
			env.Progress("pipeline: round %d/%d: %s", round+1, cfg.rounds, targets[i].Name())
			if err := s.runRound(ctx, env, cfg, targets[i], results[i], postmasterPID(pg.DataDir)); err != nil {
				results[i].err = err
				env.Progress("pipeline: %s failed: %v", targets[i].Name(), err)
			}
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
		}
	}
	if results[0].err != nil {
		return "", fmt.Errorf("%s: %w", results[0].name, results[0].err)
	}
	for _, r := range results {
		for i := range r.rates {
			slices.Sort(r.rates[i].lat)
			slices.Sort(r.rates[i].toOutcome)
			slices.Sort(r.rates[i].toNotify)
		}
	}
	return renderPipeline(env, cfg, results, time.Since(begun)), nil
}

// runRound starts t's worker, warms up, runs every offered rate and the closed loop, and stops
// the worker.
func (s *pipelineSuite) runRound(ctx context.Context, env *Env, cfg pipelineConfig, t target, res *targetResult, postmaster int) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var r router
	if err := t.Start(rctx, env, r.finished); err != nil {
		return err
	}
	defer t.Stop()
	subs, err := t.Submitters(rctx, cfg.clients)
	if err != nil {
		return err
	}
	if err := warmUp(rctx, subs, &r); err != nil {
		return err
	}
	for i, rate := range cfg.rates {
		m0, c0 := readMachineCPU(), snapCPU(postmaster, t.WorkerPid())
		rr, err := runRate(rctx, t, subs, &r, rate, cfg.rateDur)
		if err != nil {
			return err
		}
		m := readMachineCPU().sub(m0)
		m.ours = snapCPU(postmaster, t.WorkerPid()).since(c0)
		res.busy.add(m)
		res.rates[i].add(rr)
	}
	tp, err := runThroughput(rctx, env, cfg, t, subs, &r, postmaster)
	if err != nil {
		return err
	}
	res.busy.add(tp.busy)
	res.tputs = append(res.tputs, tp)
	return nil
}

// warmUp waits for the worker to complete a first request (it may still be starting), then runs
// a second at a low rate.
func warmUp(ctx context.Context, subs []submitFunc, r *router) error {
	first := make(chan struct{}, 1)
	tr := newTracker(func() {
		select {
		case first <- struct{}{}:
		default:
		}
	})
	r.cur.Store(tr)
	key, err := subs[0](ctx)
	if err != nil {
		return fmt.Errorf("first request: %w", err)
	}
	tr.committed(key, time.Now())
	select {
	case <-first:
	case <-time.After(60 * time.Second):
		return errors.New("the worker completed no request within 60 s")
	case <-ctx.Done():
		return ctx.Err()
	}
	tr = newTracker(nil)
	r.cur.Store(tr)
	lr := openLoop(ctx, subs, tr, 100, time.Second)
	if lr.firstErr != nil {
		return lr.firstErr
	}
	if n := tr.drain(15 * time.Second); n > 0 {
		return fmt.Errorf("warm-up: %d requests not completed", n)
	}
	return nil
}

func runRate(ctx context.Context, t target, subs []submitFunc, r *router, rate float64, dur time.Duration) (rateResult, error) {
	tr := newTracker(nil)
	r.cur.Store(tr)
	lr := openLoop(ctx, subs, tr, rate, dur)
	if lr.firstErr != nil && lr.submitted == 0 {
		return rateResult{}, lr.firstErr
	}
	missing := tr.drain(10 * time.Second)
	ss := tr.samples()
	rr := rateResult{rate: rate, submitted: lr.submitted, elapsed: lr.end.Sub(lr.start),
		lat: latenciesOf(ss, time.Time{}, time.Now().Add(time.Hour)), missing: missing, late: lr.late, errors: lr.errors}
	if st, ok := t.(stamper); ok {
		rr.toOutcome, rr.toNotify = split(ctx, st, ss)
	}
	return rr, nil
}

// split divides each latency at the outcome UPDATE's clock_timestamp() (same machine, same
// clock): commit → outcome statement, and outcome statement → completion received.
func split(ctx context.Context, st stamper, ss []sample) (toOutcome, toNotify latencies) {
	keys := make([]string, len(ss))
	for i, s := range ss {
		keys[i] = s.key
	}
	fin, err := st.FinishedAt(ctx, keys)
	if err != nil {
		return nil, nil
	}
	for _, s := range ss {
		if f, ok := fin[s.key]; ok {
			toOutcome = append(toOutcome, f.Sub(s.commit))
			toNotify = append(toNotify, s.done.Sub(f))
		}
	}
	return toOutcome, toNotify
}

func runThroughput(ctx context.Context, env *Env, cfg pipelineConfig, t target, subs []submitFunc, r *router, postmaster int) (tputResult, error) {
	tokens := make(chan struct{}, cfg.window)
	tr := newTracker(func() {
		select {
		case <-tokens:
		default:
		}
	})
	r.cur.Store(tr)
	monitorDSN, err := env.SuperDSN(ctx, "postgres")
	if err != nil {
		return tputResult{}, err
	}
	kinds, labels := pgSessionKinds(ctx, monitorDSN)
	type snap struct {
		cpu cpuSnap
		m   machineCPU
	}
	snapped := make(chan snap, 1)
	go func() {
		time.Sleep(cfg.warm)
		resetStatements(ctx, monitorDSN)
		snapped <- snap{snapCPU(postmaster, t.WorkerPid()), readMachineCPU()}
	}()
	lr := windowLoop(ctx, subs, tr, tokens, cfg.warm+cfg.measure)
	after, mAfter := snapCPU(postmaster, t.WorkerPid()), readMachineCPU()
	before := <-snapped
	kinds2, labels2 := pgSessionKinds(ctx, monitorDSN)
	maps.Copy(kinds, kinds2)
	maps.Copy(labels, labels2)
	if os.Getenv("BENCH_DEBUG") != "" {
		debugCPU(env, t.Name(), before.cpu, after, labels)
	}
	stmts := topStatements(ctx, monitorDSN, t.DB())
	if lr.firstErr != nil && lr.submitted == 0 {
		return tputResult{}, lr.firstErr
	}
	from, to := lr.start.Add(cfg.warm), lr.start.Add(cfg.warm+cfg.measure)
	ss := tr.samples()
	res := tputResult{lat: latenciesOf(ss, from, to), cpu: cpuDelta(before.cpu, after, t.WorkerPid(), kinds), stmts: stmts}
	res.busy = mAfter.sub(before.m)
	res.busy.ours = 0
	for _, d := range res.cpu {
		res.busy.ours += d
	}
	res.count = len(res.lat)
	window := to.Sub(from).Seconds()
	res.completed = float64(res.count) / window
	inserted := 0
	for _, s := range ss {
		if !s.commit.Before(from) && s.commit.Before(to) {
			inserted++
		}
	}
	tr.mu.Lock()
	for _, c := range tr.commits {
		if !c.Before(from) && c.Before(to) {
			inserted++
		}
	}
	tr.mu.Unlock()
	res.inserted = float64(inserted) / window
	if n := tr.drain(60 * time.Second); n > 0 {
		env.Progress("pipeline: %s: %d requests still unfinished 60 s after the closed loop", t.Name(), n)
	}
	return res, nil
}

// stmtStat is one pg_stat_statements row.
type stmtStat struct {
	calls   int64
	totalMS float64
	query   string
}

func resetStatements(ctx context.Context, dsn string) {
	if conn, err := connect(ctx, dsn, appMonitor); err == nil {
		_, _ = conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
		conn.Close(context.WithoutCancel(ctx))
	}
}

func topStatements(ctx context.Context, dsn, db string) []stmtStat {
	conn, err := connect(ctx, dsn, appMonitor)
	if err != nil {
		return nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
SELECT s.calls, s.total_exec_time, regexp_replace(s.query, '\s+', ' ', 'g')
  FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
 WHERE d.datname = $1
 ORDER BY s.total_exec_time DESC LIMIT 6`, db)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []stmtStat
	for rows.Next() {
		var s stmtStat
		if rows.Scan(&s.calls, &s.totalMS, &s.query) == nil {
			if len(s.query) > 110 {
				s.query = s.query[:110] + "…"
			}
			s.query = strings.ReplaceAll(s.query, "|", `\|`)
			out = append(out, s)
		}
	}
	return out
}
