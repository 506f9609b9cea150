// Command dataenv-runner runs one DuckDB job in a process of its own, so an engine crash, an
// out-of-memory kill or a cancellation ends the job and never the sidecar. The sidecar's
// runner/client spawns it; people can run it by hand to debug a job.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

const usage = `dataenv-runner: run one DuckDB job (DuckDB 1.5.5 with ducklake, postgres_scanner, httpfs).

Usage:
  dataenv-runner [--oom-score-adj N] [--extension-dir DIR --preload NAME,... [--ready-fd N]
                 [--memory-limit SIZE] [--threads N] [--temp-directory DIR]
                 [--max-temp-directory-size SIZE]] < job.json
      Read one job as JSON on stdin (runner/protocol.Request: blocks, args, memory_limit,
      threads, temp_directory, max_result_bytes, result_path, collect_last_only,
      extension_directory) and write the response JSON to result_path. This is how the
      sidecar calls it; credentials travel only on stdin.
      Exit status: 0 success, 1 the job failed (error in the result file), 2 bad request.
      With --preload, DuckDB opens and loads those extensions from DIR while the job is
      still on its way, then writes a byte to file descriptor N: how the client keeps a
      warm spare; a second byte there says the result file is whole, before the exit. The
      settings given with it are set before the job arrives too (the job's own, when they
      differ, replace them). --oom-score-adj sets the process's oom_score_adj before anything
      else.

  dataenv-runner run [flags] --sql 'SQL' [--sql 'SQL' ...]
      Run SQL blocks by hand and print the response JSON on stdout. For debugging: SQL given
      on the command line is visible to other users of the machine, so keep secrets out of
      it (or pipe a job file on stdin instead).
        --extension-dir DIR   DuckDB extension_directory (default $DATAENV_DUCKDB_EXTENSION_DIR,
                              else $HOME/.duckdb/extensions)
        --memory-limit SIZE   DuckDB memory_limit, e.g. 2GB
        --max-result-bytes N  bound on the rows' JSON (default 10 MiB)
        --last-only           keep only the last block's rows

  dataenv-runner install [--extension-dir DIR] [--force] NAME...
      INSTALL (or FORCE INSTALL) extensions from DuckDB's repository into the extension
      directory. runner/scripts/install-extensions.sh falls back to PyPI when this fails.

  dataenv-runner --help
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return runJob(args, stdin, stderr)
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		fmt.Fprint(stdout, usage)
		return 0
	case strings.HasPrefix(args[0], "-"): // the job mode's flags
		return runJob(args, stdin, stderr)
	}
	switch args[0] {
	case "run":
		return runManual(args[1:], stdout, stderr)
	case "install":
		return runInstall(args[1:], stderr)
	default:
		fmt.Fprintf(stderr, "dataenv-runner: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
