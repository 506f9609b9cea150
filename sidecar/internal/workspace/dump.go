package workspace

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadProgress is how far a load is: bytes streamed between the tools, and (pg_restore
// --verbose) objects created and tables whose data loading started.
type loadProgress struct {
	Bytes, Objects, Tables int64
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

// tail keeps the last 8 KiB written to it (a tool's stderr) and, if objects and tables are
// set, counts the pg_restore --verbose lines that announce an object, or a table's data.
type tail struct {
	mu              sync.Mutex
	buf             []byte
	objects, tables *atomic.Int64
	line            []byte
}

const tailMax = 8 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = t.buf[len(t.buf)-tailMax:]
	}
	if t.objects != nil {
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
		switch {
		case bytes.Contains(l, []byte("processing data for table")):
			t.tables.Add(1)
		case bytes.Contains(l, []byte("creating ")):
			t.objects.Add(1)
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
