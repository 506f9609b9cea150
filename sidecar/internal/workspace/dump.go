package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dataenv/dataenv/sidecar/internal/cluster"
	"github.com/dataenv/dataenv/sidecar/internal/pgtool"
)

// loadJob is one dump-and-restore: parent (src) into the fork copy (dst), run as the cluster's
// admin with the cluster's TLS settings (cluster.Libpq), objects owned by the application role.
type loadJob struct {
	mode     string     // schema_only or full_copy
	tools    pgtool.Set // at least as new as the cluster's server
	src, dst *cluster.Libpq
	dstDB    string
	appRole  string
	progress func(bytes int64, items int64)
	every    time.Duration
}

// load copies the parent into the (empty) fork copy:
//
//	schema_only: pg_dump --schema-only --no-owner | psql -1 -v ON_ERROR_STOP=1 (after SET ROLE)
//	full_copy:   pg_dump -Fc --no-owner | pg_restore --no-owner --role=<app> --single-transaction
//
// Both restore in one transaction: a copy is either complete or empty, never half loaded by a
// finished tool. The children die with the sidecar (Pdeathsig); a copy interrupted any other
// way is still in state creating and is dropped and made again by the next attempt.
func (s *Service) load(ctx context.Context, j loadJob) error {
	var restore *exec.Cmd
	var prelude string
	dumpArgs := []string{"--no-owner", "--no-password"}
	if j.mode == ModeSchemaOnly {
		dumpArgs = append(dumpArgs, "--schema-only")
		restore = exec.CommandContext(ctx, j.tools.Path(pgtool.Psql), "-X", "-q", "--no-password", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-f", "-")
		prelude = "SET ROLE " + pgx.Identifier{j.appRole}.Sanitize() + ";\n"
	} else {
		dumpArgs = append(dumpArgs, "--format=custom", "--compress=0")
		restore = exec.CommandContext(ctx, j.tools.Path(pgtool.PgRestore), "--no-owner", "--no-password", "--role="+j.appRole,
			"--single-transaction", "--exit-on-error", "--verbose", "--dbname="+j.dstDB)
	}
	producer := exec.CommandContext(ctx, j.tools.Path(pgtool.PgDump), dumpArgs...)
	producer.Env, restore.Env = j.src.Environ(), j.dst.Environ()
	return runPipeline(ctx, producer, restore, prelude, j.progress, j.every)
}

// runPipeline runs producer | consumer with Go copying in between (counting bytes), and reports
// progress every interval. stderr of each tool (bounded) goes into the error.
func runPipeline(ctx context.Context, producer, consumer *exec.Cmd, prelude string, progress func(int64, int64), every time.Duration) error {
	for _, c := range []*exec.Cmd{producer, consumer} {
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		c.WaitDelay = 5 * time.Second
	}
	var items atomic.Int64
	prodErr, consErr := &tail{}, &tail{count: &items}
	producer.Stderr, consumer.Stderr = prodErr, consErr
	out, err := producer.StdoutPipe()
	if err != nil {
		return err
	}
	in, err := consumer.StdinPipe()
	if err != nil {
		return err
	}
	if err := consumer.Start(); err != nil {
		return fmt.Errorf("start %s: %w", consumer.Path, err)
	}
	if err := producer.Start(); err != nil {
		_ = in.Close()
		_ = consumer.Wait()
		return fmt.Errorf("start %s: %w", producer.Path, err)
	}
	var copied atomic.Int64
	stop := reportEvery(every, func() { progress(copied.Load(), items.Load()) })
	copyErr := pump(in, out, prelude, &copied)
	_ = in.Close()
	pe, ce := producer.Wait(), consumer.Wait()
	stop()
	progress(copied.Load(), items.Load())
	switch {
	case ce != nil:
		return fmt.Errorf("%s failed (%v): %s", toolName(consumer), ce, consErr.String())
	case pe != nil:
		return fmt.Errorf("%s failed (%v): %s", toolName(producer), pe, prodErr.String())
	case copyErr != nil:
		return fmt.Errorf("copy %s output into %s: %w", toolName(producer), toolName(consumer), copyErr)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return nil
}

// pump writes prelude, then everything from out, into in. On a write error (the consumer
// stopped) it closes out so that the producer stops too.
func pump(in io.Writer, out io.ReadCloser, prelude string, copied *atomic.Int64) error {
	if _, err := io.WriteString(in, prelude); err != nil {
		_ = out.Close()
		return err
	}
	buf := make([]byte, 256<<10)
	for {
		n, rerr := out.Read(buf)
		if n > 0 {
			if _, werr := in.Write(buf[:n]); werr != nil {
				_ = out.Close()
				return werr
			}
			copied.Add(int64(n))
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// reportEvery calls fn every interval until the returned stop is called.
func reportEvery(every time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func toolName(c *exec.Cmd) string {
	if i := strings.LastIndexByte(c.Path, '/'); i >= 0 {
		return c.Path[i+1:]
	}
	return c.Path
}

// tail keeps the last 8 KiB written to it (a tool's stderr) and, if count is set, counts the
// pg_restore --verbose lines that announce an object or a table's data.
type tail struct {
	mu    sync.Mutex
	buf   []byte
	count *atomic.Int64
	line  []byte
}

const tailMax = 8 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = t.buf[len(t.buf)-tailMax:]
	}
	if t.count != nil {
		t.countLines(p)
	}
	return len(p), nil
}

func (t *tail) countLines(p []byte) {
	t.line = append(t.line, p...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			break
		}
		l := t.line[:i]
		if bytes.Contains(l, []byte("creating ")) || bytes.Contains(l, []byte("processing data for table")) {
			t.count.Add(1)
		}
		t.line = t.line[i+1:]
	}
	if len(t.line) > 4096 { // an endless line: only its start matters
		t.line = t.line[:1024]
	}
	t.line = append([]byte(nil), t.line...)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
