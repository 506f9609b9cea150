package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer collects a process's output (exec's copying goroutines write while tests read).
// With Max set it keeps the first Max bytes, enough to explain a failure, and drops the rest.
type LogBuffer struct {
	Max int

	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.Max > 0 && b.buf.Len() > b.Max {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
