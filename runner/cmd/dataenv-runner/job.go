package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/dataenv/dataenv/runner/engine"
	"github.com/dataenv/dataenv/runner/protocol"
)

// maxRequestBytes bounds the stdin job.
const maxRequestBytes = 64 << 20

// runJob reads one Request from stdin, runs it and writes the Response to its result path.
func runJob(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("dataenv-runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	extDir := fs.String("extension-dir", "", "DuckDB extension_directory of the preloaded instance")
	preload := fs.String("preload", "", "extensions to load before the job arrives")
	readyFD := fs.Int("ready-fd", 0, "file descriptor that gets a byte once the preload is done, and another once the result is written")
	oomScore := fs.Int("oom-score-adj", 0, "oom_score_adj to set before anything else (0: leave it)")
	var expect engine.Settings
	fs.StringVar(&expect.MemoryLimit, "memory-limit", "", "with --preload: memory_limit to set before the job arrives (a job asking for another sets its own)")
	fs.IntVar(&expect.Threads, "threads", 0, "with --preload: threads to set before the job arrives")
	fs.StringVar(&expect.TempDirectory, "temp-directory", "", "with --preload: temp_directory to set before the job arrives")
	fs.StringVar(&expect.MaxTempDirectorySize, "max-temp-directory-size", "", "with --preload: max_temp_directory_size to set before the job arrives")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *oomScore != 0 {
		raiseOOMScore(*oomScore, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	warm := make(chan warmInstance, 1)
	var ready *os.File
	if *readyFD > 2 {
		ready = os.NewFile(uintptr(*readyFD), "ready")
		defer ready.Close()
	}
	if *preload != "" {
		go func() {
			exts := strings.Split(*preload, ",")
			in, err := engine.Open(ctx, *extDir, exts...)
			if err == nil && slices.Contains(exts, "ducklake") {
				// A failed warm-up leaves a spare as good as one without it.
				if werr := in.WarmUp(ctx, "."); werr != nil {
					fmt.Fprintf(stderr, "dataenv-runner: %v\n", werr)
				}
			}
			if err == nil {
				// A failure leaves them to the job, which sets them again.
				if aerr := in.Apply(ctx, expect); aerr != nil {
					fmt.Fprintf(stderr, "dataenv-runner: settings before the job: %v\n", aerr)
				}
				if perr := in.PresetSandbox(ctx); perr != nil {
					fmt.Fprintf(stderr, "dataenv-runner: %v\n", perr)
				}
			}
			if ready != nil {
				// A byte, not just EOF: a jail may hold its own copy of the descriptor open.
				// Written before the instance is handed over, so it always comes first.
				ready.Write([]byte{protocol.ReadyByte})
			}
			warm <- warmInstance{in, err}
		}()
	} else {
		close(warm)
	}
	req, err := readRequest(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "dataenv-runner: %v\n", err)
		return 2
	}
	if req.Mode == protocol.ModeInstall {
		return runInstallRequest(ctx, req, stderr)
	}
	resp := runRequest(ctx, req, <-warm, *extDir)
	if err := writeResponse(req.ResultPath, resp); err != nil {
		fmt.Fprintf(stderr, "dataenv-runner: %v\n", err)
		return 2
	}
	if ready != nil && *preload != "" {
		// The result is whole: the client may read it while this process exits (the exit of a
		// process with DuckDB loaded takes the kernel several milliseconds), at the lowest
		// priority.
		ready.Write([]byte{protocol.WrittenByte})
		yieldExit()
	}
	afterResult(req)
	if resp.Error != "" {
		return 1
	}
	return 0
}

type warmInstance struct {
	in  *engine.Instance
	err error
}

// runRequest runs req on the preloaded instance when there is one for the same extension
// directory, else on a fresh one. The preloaded instance is left open when it ran the job: the
// process exits once the result is written, and its exit ends what closing DuckDB would (the
// catalog sessions, file locks, the memory), without the milliseconds a close spends freeing
// what the exit frees anyway; every commit of the job is durable before its statement returns.
func runRequest(ctx context.Context, req *protocol.Request, w warmInstance, extDir string) *protocol.Response {
	if w.in == nil || w.err != nil || req.ExtensionDirectory != extDir {
		if w.in != nil {
			w.in.Close()
		}
		return engine.Run(ctx, req, testHook(req))
	}
	return engine.RunOn(ctx, w.in, req, testHook(req))
}

func readRequest(r io.Reader) (*protocol.Request, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the job from stdin: %w", err)
	}
	if len(data) > maxRequestBytes {
		return nil, fmt.Errorf("the job on stdin is larger than %d bytes", maxRequestBytes)
	}
	var req protocol.Request
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("the job on stdin is not valid JSON (see --help): %w", err)
	}
	if req.Mode == "" {
		req.Mode = protocol.ModeRun
	}
	if req.Mode != protocol.ModeRun && req.Mode != protocol.ModeInstall {
		return nil, fmt.Errorf("job mode %q: want %q or %q", req.Mode, protocol.ModeRun, protocol.ModeInstall)
	}
	if req.ResultPath == "" {
		return nil, fmt.Errorf("the job has no result_path")
	}
	return &req, nil
}

// writeResponse creates the result file without following a symlink planted at its path.
func writeResponse(path string, resp *protocol.Response) error {
	data, err := json.Marshal(resp)
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("open the result file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write the result file: %w", err)
	}
	return f.Close()
}

// raiseOOMScore makes the kernel pick this process first when memory runs out. The score is
// set exactly as asked; only when asked to lower an inherited higher score without the
// privilege to do so does the higher one stay, silently: the runner is then still picked first.
func raiseOOMScore(adj int, stderr io.Writer) {
	const path = "/proc/self/oom_score_adj"
	err := os.WriteFile(path, []byte(strconv.Itoa(adj)), 0)
	if err == nil {
		return
	}
	if cur, rerr := os.ReadFile(path); rerr == nil {
		if n, perr := strconv.Atoi(strings.TrimSpace(string(cur))); perr == nil && n >= adj {
			return
		}
	}
	fmt.Fprintf(stderr, "dataenv-runner: raise oom_score_adj: %v\n", err)
}
