package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Fault classes, in report order.
const (
	faultKillRestart  = "SIGKILL of the leader (no standby: restarted)"
	faultKillTakeover = "SIGKILL of the leader (hot standby takes over)"
	faultWalsender    = "walsender terminated"
	faultStorm        = "pg_terminate_backend storm on the sidecar's sessions"
	faultRestartFast  = "PostgreSQL restart (fast)"
	faultRestartImm   = "PostgreSQL restart (immediate)"
	faultSlotDrop     = "replication slot dropped"
)

var faultClasses = []string{faultKillRestart, faultKillTakeover, faultWalsender, faultStorm, faultRestartFast, faultRestartImm, faultSlotDrop}

// fault is one injected fault.
type fault struct {
	Class string
	At    time.Time
}

// faultLog is every fault of the run, in order, and the leader takeover times after kills.
type faultLog struct {
	mu        sync.Mutex
	faults    []fault
	takeovers map[string][]time.Duration // kill class -> time from the kill to a new leader streaming
}

func (l *faultLog) add(class string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, fault{Class: class, At: at})
}

func (l *faultLog) all() []fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fault(nil), l.faults...)
}

// uncovered is a fault class other than the leader kills that the run has not injected yet, so
// that a short run covers every class whatever its randomness drew; else it is class.
func (l *faultLog) uncovered(class string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	for _, f := range l.faults {
		seen[f.Class] = true
	}
	for _, c := range faultClasses {
		if c != faultKillRestart && c != faultKillTakeover && !seen[c] {
			return c
		}
	}
	return class
}

// lastBefore is the last fault in (from, to], or false.
func (l *faultLog) lastBefore(from, to time.Time) (fault, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.faults) - 1; i >= 0; i-- {
		f := l.faults[i]
		if f.At.After(to) {
			continue
		}
		if f.At.After(from) {
			return f, true
		}
		break
	}
	return fault{}, false
}

// inject injects faults until kills leader kills are done (or ctx ends). It alternates phases of
// 40 faults with one sidecar (a killed leader is restarted in place) and with a hot standby (the
// standby takes over and the killed one is restarted as the new standby). Between faults it
// usually waits for a leader that streams and then a random gap; one time in four it strikes at
// once, in the middle of a takeover. Every 20th fault is one of a class not injected yet, if any.
func (h *harness) inject(ctx context.Context, kills int) error {
	done, standby := 0, false
	for n := 0; done < kills && ctx.Err() == nil; n++ {
		if n%40 == 0 {
			standby = !standby
			if err := h.setPhase(standby); err != nil {
				return err
			}
		}
		if h.randFloat() < 0.75 {
			h.sc.waitReady(ctx, time.Minute)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(h.gap()):
		}
		class := h.pickFault(standby)
		if n%20 == 19 {
			class = h.faults.uncovered(class)
		}
		if err := h.injectOne(ctx, class, standby); err != nil {
			h.opts.Logf("inject %s: %v", class, err)
			continue
		}
		if class == faultKillRestart || class == faultKillTakeover {
			done++
			if done%50 == 0 {
				h.opts.Logf("%d of %d leader kills, %d faults in all, %d requests", done, kills, n+1, h.requests())
			}
		}
	}
	return ctx.Err()
}

// gap is the pause before the next fault: exponential, mean 1 s, at most 6 s.
func (h *harness) gap() time.Duration {
	return min(time.Duration(-math.Log(1-h.randFloat())*float64(time.Second)), 6*time.Second)
}

// pickFault: mostly leader kills (so the full run reaches its 1,000 kills), every other class a
// few percent.
func (h *harness) pickFault(standby bool) string {
	x := h.randFloat()
	switch {
	case x < 0.04:
		return faultWalsender
	case x < 0.08:
		return faultStorm
	case x < 0.11:
		return faultSlotDrop
	case x < 0.135:
		return faultRestartFast
	case x < 0.16:
		return faultRestartImm
	case standby:
		return faultKillTakeover
	default:
		return faultKillRestart
	}
}

// setPhase runs one sidecar, or two (a leader and a hot standby).
func (h *harness) setPhase(standby bool) error {
	if standby {
		return h.sc.ensure(2)
	}
	h.sc.reap()
	leader, _, _ := h.sc.leader(context.Background())
	for _, pid := range h.sc.others(leader) {
		if h.sc.alive() <= 1 {
			break
		}
		h.sc.kill(pid) // a standby leaves quietly: not a fault of the report
	}
	return h.sc.ensure(1)
}

func (h *harness) injectOne(ctx context.Context, class string, standby bool) error {
	switch class {
	case faultKillRestart, faultKillTakeover:
		return h.killLeader(ctx, class, standby)
	case faultWalsender:
		h.faults.add(class, time.Now())
		return h.execDB(ctx, controlDB, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE slot_name = dataenv.slot_name() AND active_pid IS NOT NULL`)
	case faultStorm:
		h.faults.add(class, time.Now())
		for range 3 {
			if err := h.execDB(ctx, "postgres", `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name LIKE 'dataenv/%' AND pid <> pg_backend_pid()`); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nil
	case faultRestartFast:
		h.faults.add(class, time.Now())
		return h.pg.Restart(ctx)
	case faultRestartImm:
		h.faults.add(class, time.Now())
		return h.pg.RestartImmediate(ctx)
	case faultSlotDrop:
		h.faults.add(class, time.Now())
		return h.dropSlot(ctx)
	}
	return fmt.Errorf("unknown fault %q", class)
}

// killLeader SIGKILLs the leading sidecar (waiting a little for one when a takeover is under
// way), restarts a sidecar in its place, and measures the takeover in the background.
func (h *harness) killLeader(ctx context.Context, class string, standby bool) error {
	want := 1
	if standby {
		want = 2
	}
	if err := h.sc.ensure(want); err != nil { // replaces any that exited on their own
		return err
	}
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		p, _, err := h.sc.leader(ctx)
		if err == nil && h.sc.isOurs(p) {
			pid = p
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pid == 0 {
		return fmt.Errorf("no leader to kill within 10s")
	}
	at := time.Now()
	h.faults.add(class, at)
	h.sc.kill(pid)
	if err := h.sc.ensure(want); err != nil {
		return err
	}
	go h.measureTakeover(ctx, class, at)
	return nil
}

// measureTakeover records the time from a kill to a new leader that streams, unless another
// fault comes first.
func (h *harness) measureTakeover(ctx context.Context, class string, at time.Time) {
	if h.sc.waitReady(ctx, 2*time.Minute) == 0 {
		return
	}
	took := time.Since(at)
	if f, ok := h.faults.lastBefore(at, time.Now()); ok && f.At.After(at) {
		return
	}
	h.faults.mu.Lock()
	defer h.faults.mu.Unlock()
	if h.faults.takeovers == nil {
		h.faults.takeovers = map[string][]time.Duration{}
	}
	h.faults.takeovers[class] = append(h.faults.takeovers[class], took)
}

// dropSlot ends the slot's walsender and drops the slot, retrying while the sidecar reconnects.
func (h *harness) dropSlot(ctx context.Context) error {
	for range 200 {
		var dropped int
		err := h.queryDB(ctx, controlDB, `SELECT count(pg_terminate_backend(active_pid, 1000))::int FROM pg_replication_slots
			WHERE slot_name = dataenv.slot_name() AND active_pid IS NOT NULL`, nil, &dropped)
		if err != nil {
			return err
		}
		err = h.queryDB(ctx, controlDB, `SELECT count(pg_drop_replication_slot(slot_name))::int FROM pg_replication_slots
			WHERE slot_name = dataenv.slot_name() AND NOT active`, nil, &dropped)
		if err == nil && dropped == 1 {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("the slot stayed active")
}

func (h *harness) requests() int {
	h.recs.mu.Lock()
	defer h.recs.mu.Unlock()
	return len(h.recs.recs)
}
