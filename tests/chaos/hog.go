package main

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// startHogs runs n busy threads at nice 5: they take the CPU whenever the system under test
// leaves it, and a share of it when it does not (a contended machine, as in production on a
// busy host). The returned function stops them.
func startHogs(n int) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + n) // the hogs must not take the harness's own Go threads
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // nice is per thread on Linux; the thread exits with the goroutine
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 5)
			x := uint64(1)
			for !quit.Load() {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		}()
	}
	return func() {
		quit.Store(true)
		wg.Wait()
		runtime.GOMAXPROCS(procs)
	}
}
