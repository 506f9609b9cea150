package main

import "syscall"

// exitNice is the priority a runner exits at once its result is read ahead of its exit.
const exitNice = 19

// yieldExit lowers this process's group (the runner, its threads, and a jail's wrappers) to the
// lowest priority. The exit of a process with DuckDB loaded (its memory given back, its threads
// ended) takes the kernel several milliseconds of CPU, spent by whichever thread ends last; the
// result is already with the client by then, and on a small machine that time otherwise competes
// with the request's outcome being written and delivered. Lowering one's own priority needs no
// privilege, and PRIO_PGRP reaches every thread without reading /proc (which a PID namespace
// may not have of its own).
func yieldExit() {
	_ = syscall.Setpriority(syscall.PRIO_PGRP, 0, exitNice)
}
