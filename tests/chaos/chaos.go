package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Options of a chaos run.
type Options struct {
	Kills int   // leader SIGKILLs to inject; the other fault classes come in proportion
	Hogs  int   // CPU hogs
	Seed  int64 // randomness of gaps and fault choices
	Logf  func(format string, args ...any)
	// Quiesce bounds how long, after the last fault, the workload may take to finish what it
	// started; a request not finished by then is lost. Default 10 minutes.
	Quiesce time.Duration
}

// Run builds the installation, runs the workload while injecting faults, lets it finish, checks
// everything and returns the report. The run directory (the sidecars' logs) is removed when the
// run is clean and kept, and named in the log, when it is not.
func Run(ctx context.Context, opts Options) (rep *Report, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Quiesce <= 0 {
		opts.Quiesce = 10 * time.Minute
	}
	h, err := newHarness(ctx, opts)
	keep := true
	defer func() {
		if h != nil {
			h.close(keep)
		}
		if keep && h != nil {
			opts.Logf("kept the run directory %s", h.dir)
		}
	}()
	if err != nil {
		return nil, err
	}
	if err := h.sc.ensure(1); err != nil {
		return nil, err
	}
	if h.sc.waitReady(ctx, 2*time.Minute) == 0 {
		return nil, fmt.Errorf("no sidecar became a streaming leader")
	}
	opts.Logf("preparing the workspace (cluster set up, parent database, lake)")
	if err := h.prepare(ctx); err != nil {
		return nil, err
	}
	stopHogs := startHogs(opts.Hogs)
	hogsStopped := false
	defer func() {
		if !hogsStopped {
			stopHogs()
		}
	}()
	started := time.Now()
	opts.Logf("workload and faults start: %d leader kills to go, %d CPU hogs", opts.Kills, opts.Hogs)
	stop := make(chan struct{})
	lanesCtx, cancelLanes := context.WithCancel(ctx)
	defer cancelLanes()
	var wg sync.WaitGroup
	for _, fn := range h.lanes() {
		wg.Add(1)
		go func() { defer wg.Done(); fn(lanesCtx, stop) }()
	}
	if err := h.inject(ctx, opts.Kills); err != nil {
		close(stop)
		cancelLanes()
		wg.Wait()
		return nil, err
	}
	faultsEnded := time.Now()
	close(stop)
	opts.Logf("faults done (%d requests so far); letting the workload finish", h.requests())
	if err := h.sc.ensure(2); err != nil {
		return nil, err
	}
	lanesDone := make(chan struct{})
	go func() { wg.Wait(); close(lanesDone) }()
	select {
	case <-lanesDone:
	case <-time.After(opts.Quiesce):
		opts.Logf("the workload did not finish within %s of the last fault; what is unfinished is lost", opts.Quiesce)
		cancelLanes()
		<-lanesDone
	}
	ended := time.Now()
	stopHogs()
	hogsStopped = true
	opts.Logf("checking %d requests and looking for leftovers", h.requests())
	h.finish(ctx)
	found, err := h.leftovers(ctx)
	if err != nil {
		return nil, fmt.Errorf("look for leftovers: %w", err)
	}
	unowned := h.judgeLeftovers(found)
	rep = h.report(started, faultsEnded, ended, unowned)
	keep = !rep.Clean()
	return rep, nil
}
