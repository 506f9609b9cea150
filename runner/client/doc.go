// Package client spawns dataenv-runner processes for the sidecar. It is cgo-free.
//
// One job, one process: Run creates a private work directory, starts the runner under the
// isolation chosen for the job, sends the job as JSON on the runner's stdin (credentials never
// reach argv or an environment), waits, reads the result file and removes the work directory.
//
//	Jailed   nsjail when installed, else bubblewrap: read-only /usr and a few files of /etc,
//	         the work directory as the only writable place (/.dataenv-jail/work, and /tmp in it), the
//	         runner binary and the extension cache mounted read-only, nothing else of the host.
//	Unshare  its own PID namespace, as `unshare --pid --fork` gives (made with clone flags, so
//	         no wrapper hides the runner's exit status), the host's file system.
//	Plain    a child process with a cleared environment.
//
// In every mode the environment is cleared except PATH, HOME, TZ and the proxy variables, the
// runner raises its own OOM score first thing (--oom-score-adj; a jail's wrappers get it before
// exec through choom) so the kernel kills the runner rather than the sidecar (and with
// Config.Cgroup the runner joins a cgroup, a memory-limited one say, before exec), and the
// runner leads its own session and process group: cancellation, a timeout and the spill
// watchdog kill the whole group, so no jailed grandchild survives. Output is kept as bounded
// tails; the result file is opened without following symlinks; a runner killed by a signal
// becomes a *CrashError naming it.
//
// The spill watchdog measures the work directory (allocated blocks, symlinks not followed)
// every Config.SpillPoll and kills the group past Config.SpillCap with a *SpillError saying what
// to do; DuckDB's own max_temp_directory_size can be raised by the script, this cap cannot.
// Job.Timeout and the caller's context end a job the same way. Job.Mounts binds host
// directories (a file:// lake) into the jail at the same path.
//
// Jailed jobs find their extensions in a cache they cannot write: the client installs what a
// job needs outside the jail first (honouring FORCE INSTALL there) and rewrites FORCE INSTALL
// into a plain INSTALL inside.
//
// Limits of one job: Job.Timeout (a *LimitError that also matches context.DeadlineExceeded),
// Job.MemoryLimit and Job.Threads (DuckDB settings applied before the job's SQL, which the
// sandbox's lock_configuration keeps it from raising), Job.DiskCap (DuckDB's
// max_temp_directory_size and the watchdog's cap, which also counts the files the job writes
// into Job.WatchDirs, its local lake paths, walking them only near the cap: see diskWatch), and with Config.CgroupParent a memory cgroup of the
// runner's own whose limit is Job.MemoryMax (an OOM kill there is a *LimitError).
//
// With Config.WarmSpares (or WarmSpare, one) the client keeps that many runners per isolation
// mode started ahead of the next job (process up, DuckDB open, the required extensions loaded);
// each runs one job and exits, and a new one is started in the background as soon as a job takes
// one. A jailed job with Job.Mounts can only run on a jail started with exactly those mounts:
// Config.MountedSpareSets sets of mounts (the same directories, by device and inode) keep spares
// of their own, from a set's second job on. Prewarm (PrewarmMounted) fills a pool and waits for
// it.
package client
