package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dataenv/dataenv/sidecar/install"
)

// The satellites suite: one control installation and 100 satellites in one cluster, served by one
// sidecar whose connections to satellites are bounded by --satellite-connections.
//   - Installing the satellites (time per satellite).
//   - Pings at 100/s spread round robin over the satellites and, in alternating phases of the
//     same run, pings at 100/s from the control database: end-to-end latency (ping() committed to
//     wait() returning it finished) of each. Target: satellite p50 and p95 within 2× of control,
//     with the flag at the number of satellites (every busy satellite keeps a warm connection).
//   - The same with the flag at its default, 4: what a bound below the busy satellites costs.
//   - The sidecar's connections to satellites, sampled from pg_stat_activity throughout: never
//     above the flag.

func init() { Register(satelliteSuite{}) }

type satelliteSuite struct{}

func (satelliteSuite) Name() string { return "satellites" }

const (
	satelliteCount  = 100
	satelliteRate   = 100 // pings per second, per stream
	satelliteRounds = 2
	// satelliteIdle is the bench sidecars' --satellite-idle-timeout: longer than a control phase,
	// so the satellites' connections outlive the phases that do not use them, as they would with
	// satellites busy all the time.
	satelliteIdle = "2m"
	// satelliteDefaultConns is the flag's default, run second.
	satelliteDefaultConns = 4
)

// SatelliteResults are the suite's measurements.
type SatelliteResults struct {
	Satellites  int
	InstallEach time.Duration
	Phase       time.Duration
	Runs        []satRun // the flag at the number of satellites, then at its default
	// Load averages (1 min) at the start and at the end: the machine is shared, and the
	// satellites' cost is CPU.
	LoadStart, LoadEnd string
}

// satRun is one sidecar's phases: one value of --satellite-connections.
type satRun struct {
	ConnFlag           int
	Control, Satellite satLatencies
	PeakConns, Samples int64
	Load               string // load average after its phases
}

type satLatencies struct {
	all    []time.Duration
	failed int
}

func (l *satLatencies) add(o satLatencies) {
	l.all = append(l.all, o.all...)
	l.failed += o.failed
}

func (l satLatencies) pct(p float64) time.Duration {
	if len(l.all) == 0 {
		return 0
	}
	s := slices.Clone(l.all)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func (satelliteSuite) Run(ctx context.Context, env *Env) (string, error) {
	start := time.Now()
	phase := 15 * time.Second
	n := satelliteCount
	if env.Quick {
		phase, n = 3*time.Second, 20
	}
	res := SatelliteResults{Satellites: n, Phase: phase, LoadStart: loadAverage()}
	sc, err := installedControl(ctx, env, "bench_sat_control", satelliteSidecarEnv(n)...)
	if err != nil {
		return "", err
	}
	defer func() { sc.close() }()
	env.Progress("satellites: installing %d satellites", n)
	dbs, took, err := installSatellites(ctx, env, n)
	if err != nil {
		return "", err
	}
	res.InstallEach = took / time.Duration(n)
	ctrl, sats, err := pingPools(ctx, env, dbs)
	if err != nil {
		return "", err
	}
	defer func() {
		ctrl.Close()
		for _, p := range sats {
			p.Close()
		}
	}()
	for i, flag := range []int{n, satelliteDefaultConns} {
		if i > 0 {
			dsn := sc.pool.Config().ConnString()
			sc.close()
			if sc, err = startSidecar(ctx, dsn, satelliteSidecarEnv(flag)...); err != nil {
				return "", err
			}
		}
		run, err := satellitePhases(ctx, env, sc, ctrl, sats, flag, phase)
		if err != nil {
			return "", err
		}
		res.Runs = append(res.Runs, run)
	}
	res.LoadEnd = loadAverage()
	return renderSatellites(env, res, time.Since(start)), nil
}

func satelliteSidecarEnv(conns int) []string {
	return []string{fmt.Sprintf("DATAENV_SATELLITE_CONNECTIONS=%d", conns), "DATAENV_SATELLITE_IDLE_TIMEOUT=" + satelliteIdle}
}

// satellitePhases warms every database up with one ping, then runs the alternating phases,
// control first (both streams see the same machine, one at a time), sampling the sidecar's
// connections to satellites throughout.
func satellitePhases(ctx context.Context, env *Env, sc *benchSidecar, ctrl *pgxpool.Pool, sats []*pgxpool.Pool, flag int, phase time.Duration) (satRun, error) {
	run := satRun{ConnFlag: flag}
	env.Progress("satellites: --satellite-connections %d: warming up (one ping in every database)", flag)
	for _, p := range append([]*pgxpool.Pool{ctrl}, sats...) {
		if _, err := pingOnce(ctx, p); err != nil {
			return run, fmt.Errorf("warm-up ping: %w", err)
		}
	}
	sampler, err := sc.pool.Acquire(ctx) // a connection of its own: the ping pools may be busy
	if err != nil {
		return run, err
	}
	defer sampler.Release()
	sctx, stopSampling := context.WithCancel(ctx)
	var peak, samples atomic.Int64
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampleSatelliteConns(sctx, sampler.Conn(), &peak, &samples) }()
	for round := range satelliteRounds {
		env.Progress("satellites: --satellite-connections %d, round %d: %s of pings at %d/s from the control, then from the satellites", flag, round+1, phase, satelliteRate)
		run.Control.add(pingStream(ctx, []*pgxpool.Pool{ctrl}, phase))
		run.Satellite.add(pingStream(ctx, sats, phase))
	}
	stopSampling()
	<-sampled
	run.PeakConns, run.Samples, run.Load = peak.Load(), samples.Load(), loadAverage()
	return run, nil
}

// installSatellites creates n databases and installs a satellite in each, registered with the
// control database bench_sat_control.
func installSatellites(ctx context.Context, env *Env, n int) ([]string, time.Duration, error) {
	var dbs []string
	var took time.Duration
	for i := range n {
		db := fmt.Sprintf("bench_sat_%03d", i)
		dsn, err := env.CreateDatabase(ctx, db)
		if err != nil {
			return nil, 0, err
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, 0, err
		}
		t0 := time.Now()
		_, err = install.InstallSatellite(ctx, conn, install.SatelliteOptions{ControlDatabase: "bench_sat_control", Logger: quietLogger("satellite")})
		took += time.Since(t0)
		conn.Close(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("install a satellite in %s: %w", db, err)
		}
		dbs = append(dbs, db)
	}
	return dbs, took, nil
}

// pingPools opens a client pool on the control database and a one-connection pool on each
// satellite (100 satellites at 100/s is one ping per second each).
func pingPools(ctx context.Context, env *Env, dbs []string) (*pgxpool.Pool, []*pgxpool.Pool, error) {
	open := func(db string, conns int32) (*pgxpool.Pool, error) {
		dsn, err := env.SuperDSN(ctx, db)
		if err != nil {
			return nil, err
		}
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns, cfg.MinConns = conns, conns
		return pgxpool.NewWithConfig(ctx, cfg)
	}
	ctrl, err := open("bench_sat_control", 16)
	if err != nil {
		return nil, nil, err
	}
	var sats []*pgxpool.Pool
	for _, db := range dbs {
		p, err := open(db, 1)
		if err != nil {
			return nil, nil, err
		}
		sats = append(sats, p)
	}
	return ctrl, sats, nil
}

// pingOnce makes a ping in its own transaction and waits for its outcome: the latency a user sees.
func pingOnce(ctx context.Context, p *pgxpool.Pool) (time.Duration, error) {
	conn, err := p.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	t0 := time.Now()
	var id string
	if err := conn.QueryRow(ctx, `SELECT dataenv.ping()::text`).Scan(&id); err != nil {
		return 0, err
	}
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM dataenv.wait($1::uuid, '60 s')`, id).Scan(&status); err != nil {
		return 0, err
	}
	if status != "succeeded" {
		return 0, fmt.Errorf("ping %s finished %s", id, status)
	}
	return time.Since(t0), nil
}

// pingStream starts satelliteRate pings a second for d (open loop: a slow ping does not delay
// the next start), round robin over pools.
func pingStream(ctx context.Context, pools []*pgxpool.Pool, d time.Duration) satLatencies {
	var mu sync.Mutex
	var out satLatencies
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / satelliteRate)
	defer tick.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		wg.Add(1)
		go func(p *pgxpool.Pool) {
			defer wg.Done()
			took, err := pingOnce(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.failed++
				return
			}
			out.all = append(out.all, took)
		}(pools[i%len(pools)])
	}
	wg.Wait()
	return out
}

// sampleSatelliteConns counts the sidecar's connections to satellites as the server sees them.
func sampleSatelliteConns(ctx context.Context, p *pgx.Conn, peak, samples *atomic.Int64) {
	for ctx.Err() == nil {
		var n int64
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dataenv_satellite_envelopes'`).Scan(&n)
		if err == nil {
			samples.Add(1)
			if n > peak.Load() {
				peak.Store(n)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func renderSatellites(env *Env, r SatelliteResults, took time.Duration) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Satellites: %d databases, one sidecar (suite `satellites`)\n\n", r.Satellites)
	w("Measured on %s; the suite took %s.", env.Machine(), took.Round(time.Second))
	if env.Quick {
		w(" **Quick run (-quick): not for comparison.**")
	}
	w(" The machine is shared with other engineers' test runs, so absolute numbers move between runs; the two streams of each row pair ran in alternating phases of the same run. Load average (1 min, /proc/loadavg) %s at the start", r.LoadStart)
	for _, run := range r.Runs {
		w(", %s after the phases at `--satellite-connections %d`", run.Load, run.ConnFlag)
	}
	w(".\n\n")
	w("One control installation and %d satellites in one cluster, installed at %s ms each; one sidecar at a time, `--satellite-idle-timeout %s`. ", r.Satellites, ms(r.InstallEach), satelliteIdle)
	w("For each value of `--satellite-connections`: one ping in every database, then %d rounds, each %s of %d pings a second from the control database, then %s of %d a second spread round robin over the %d satellites (open loop: one ping a second in each). ", satelliteRounds, r.Phase, satelliteRate, r.Phase, satelliteRate, r.Satellites)
	w("Latency is what a user sees: `SELECT dataenv.ping()` committed (a satellite's envelope filed at its commit) to `dataenv.wait()` returning it finished; milliseconds. ")
	w("Target: a satellite's p50 and p95 within 2× of the control's, the sidecar's connections to satellites never above the flag.\n\n")
	w("| `--satellite-connections` | stream | pings | failed | p50 | p95 | p99 | max |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, run := range r.Runs {
		for _, s := range []struct {
			name string
			l    satLatencies
		}{{"control database", run.Control}, {"satellites", run.Satellite}} {
			w("| %d | %s | %d | %d | %s | %s | %s | %s |\n", run.ConnFlag, s.name, len(s.l.all), s.l.failed, ms(s.l.pct(0.5)), ms(s.l.pct(0.95)), ms(s.l.pct(0.99)), ms(s.l.pct(1)))
		}
	}
	verdict := func(x float64) string {
		if x <= 2 {
			return "within 2×"
		}
		return "**over 2×**"
	}
	w("\n")
	for _, run := range r.Runs {
		p50 := float64(run.Satellite.pct(0.5)) / float64(max(run.Control.pct(0.5), 1))
		p95 := float64(run.Satellite.pct(0.95)) / float64(max(run.Control.pct(0.95), 1))
		within := "never above the flag"
		if run.PeakConns > int64(run.ConnFlag) {
			within = "**above the flag**"
		}
		w("- `--satellite-connections %d`: satellite / control p50 %.2f (%s), p95 %.2f (%s); the sidecar's connections to satellites (pg_stat_activity, %d samples) at most %d, %s.\n",
			run.ConnFlag, p50, verdict(p50), p95, verdict(p95), run.Samples, run.PeakConns, within)
	}
	w("\nHow to read it. With a connection to each busy satellite (the flag at the number of satellites), a satellite ping costs what a control ping costs plus: the envelope's own transaction in the control database (over the satellite session's dblink; it commits without a WAL flush of its own, the origin's commit right after flushes both) before the origin commits, the origin check in the control (`pg_xact_status`), one statement in the satellite to load the row (the catalog attestation runs once per connection, not per envelope) and the outcome's commit there, and `dataenv.wait()` polling (every millisecond for its first 20 ms: no gate lock works across databases) where the control's wakes on a lock. A ping's envelope is not claimed (no commit in the control for that), as a control ping is not. ")
	w("With fewer connections than satellites busy at once (the flag's default, 4, against 100 satellites each pinged once a second) an envelope rarely finds a connection to its database: it closes one (the close waits for its backend to exit, read off the socket), opens one (process start, authentication) and runs on a cold backend (catalog caches, compiling `envelope_load`, `authorize_request` and `envelope_finish`), measured alone about 11 ms of work each at best (connect 4, attestation 2.5, load 4-6 of which `authorize_request` 3.5, outcome 1) and 20 ms or more on this shared machine, where a warm connection needs 1-2 ms. At 100 a second that is most of the 2 cores, so envelopes queue for a connection and that queue is the latency. ")
	w("Size `--satellite-connections` at the number of satellites busy at once (each open connection is one server backend, and counts against max_connections), and `--satellite-idle-timeout` above the pauses between a satellite's requests.\n\n")
	return b.String()
}
