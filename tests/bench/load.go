package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// submitFunc inserts one request in a transaction of its own and returns its key once the
// commit has returned.
type submitFunc func(ctx context.Context) (key string, err error)

// tracker matches commit-return times with completion times, per phase. Completions may arrive
// before the submitting goroutine records its commit (the outcome can be faster than the
// client's bookkeeping), so either side may come first.
type tracker struct {
	mu       sync.Mutex
	commits  map[string]time.Time
	early    map[string]time.Time // completions whose commit is not recorded (yet)
	done     []sample
	pending  int
	onDone   func() // called once per matched completion (window release), may be nil
	drained  chan struct{}
	draining bool
}

type sample struct {
	key    string
	commit time.Time
	done   time.Time
}

func newTracker(onDone func()) *tracker {
	return &tracker{commits: map[string]time.Time{}, early: map[string]time.Time{}, onDone: onDone}
}

func (t *tracker) committed(key string, at time.Time) {
	t.mu.Lock()
	if d, ok := t.early[key]; ok {
		delete(t.early, key)
		t.matchLocked(key, at, d)
	} else {
		t.commits[key] = at
		t.pending++
	}
	t.mu.Unlock()
}

func (t *tracker) finished(key string, at time.Time) {
	t.mu.Lock()
	if c, ok := t.commits[key]; ok {
		delete(t.commits, key)
		t.pending--
		t.matchLocked(key, c, at)
	} else {
		t.early[key] = at
	}
	t.mu.Unlock()
}

func (t *tracker) matchLocked(key string, commit, done time.Time) {
	t.done = append(t.done, sample{key: key, commit: commit, done: done})
	if t.onDone != nil {
		t.onDone()
	}
	if t.draining && t.pending == 0 && t.drained != nil {
		close(t.drained)
		t.drained = nil
	}
}

// drain waits until every recorded commit has its completion, or timeout; it returns how many
// are still missing.
func (t *tracker) drain(timeout time.Duration) int {
	t.mu.Lock()
	if t.pending == 0 {
		t.mu.Unlock()
		return 0
	}
	ch := make(chan struct{})
	t.drained, t.draining = ch, true
	t.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(timeout):
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.draining, t.drained = false, nil
	return t.pending
}

func (t *tracker) samples() []sample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.done)
}

// router sends completions to the current phase's tracker.
type router struct{ cur atomic.Pointer[tracker] }

func (r *router) finished(key string, at time.Time) {
	if t := r.cur.Load(); t != nil {
		t.finished(key, at)
	}
}

// loadResult is what a load phase did.
type loadResult struct {
	offered   float64 // requests/s asked for (open loop)
	submitted int
	errors    int
	late      int // open loop: arrivals that found every client connection busy
	firstErr  error
	start     time.Time
	end       time.Time
}

// openLoop submits at a fixed rate for dur, spreading arrivals over the given client
// connections; an arrival that finds them all busy waits (and is counted late).
func openLoop(ctx context.Context, subs []submitFunc, tr *tracker, rate float64, dur time.Duration) loadResult {
	res := loadResult{offered: rate, start: time.Now()}
	jobs := make(chan struct{})
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				submitOne(ctx, sub, tr, &mu, &res)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / rate)
	n := int(dur / interval)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if d := time.Until(res.start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case jobs <- struct{}{}:
		default:
			res.late++
			jobs <- struct{}{}
		}
	}
	close(jobs)
	wg.Wait()
	res.end = time.Now()
	return res
}

// windowLoop keeps up to window requests outstanding (submitted, not completed) with the given
// clients, for dur. tr's onDone must release a token. In-flight submits are let finish (a
// cancelled pgx query closes its connection).
func windowLoop(ctx context.Context, subs []submitFunc, tr *tracker, tokens chan struct{}, dur time.Duration) loadResult {
	res := loadResult{start: time.Now()}
	stop := make(chan struct{})
	timer := time.AfterFunc(dur, func() { close(stop) })
	defer timer.Stop()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case tokens <- struct{}{}:
				case <-stop:
					return
				case <-ctx.Done():
					return
				}
				select {
				case <-stop:
					<-tokens
					return
				default:
				}
				if !submitOne(ctx, sub, tr, &mu, &res) {
					<-tokens
				}
			}
		}()
	}
	wg.Wait()
	res.end = time.Now()
	return res
}

func submitOne(ctx context.Context, sub submitFunc, tr *tracker, mu *sync.Mutex, res *loadResult) bool {
	key, err := sub(ctx)
	at := time.Now()
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			res.errors++
			if res.firstErr == nil {
				res.firstErr = err
			}
		}
		return false
	}
	tr.committed(key, at)
	res.submitted++
	return true
}

// latencies are commit-return → completion durations, sorted.
type latencies []time.Duration

func latenciesOf(ss []sample, from, to time.Time) latencies {
	var l latencies
	for _, s := range ss {
		if !s.done.Before(from) && s.done.Before(to) {
			l = append(l, s.done.Sub(s.commit))
		}
	}
	slices.Sort(l)
	return l
}

// pct is the nearest-rank percentile p (0-100).
func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(float64(len(l))*p/100+0.999999) - 1
	return l[max(0, min(i, len(l)-1))]
}
