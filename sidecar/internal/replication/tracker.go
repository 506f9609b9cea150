package replication

import (
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
)

// tracker decides how far the slot may be confirmed. Transactions are delivered in commit order;
// each is acknowledged (possibly out of order) once every request in it has a durable state. The
// flushed position is the end of the longest acknowledged prefix.
type tracker struct {
	mu        sync.Mutex
	pending   []txMark // delivered, in order
	flushed   pglogrepl.LSN
	delivered pglogrepl.LSN
}

type txMark struct {
	end    pglogrepl.LSN
	commit time.Time
	acked  bool
}

func newTracker(start pglogrepl.LSN) *tracker {
	return &tracker{flushed: start, delivered: start}
}

// deliver records a transaction handed to the sink.
func (t *tracker) deliver(end pglogrepl.LSN, commit time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending = append(t.pending, txMark{end: end, commit: commit})
	t.delivered = end
}

// oldestCommit is the commit time of the oldest unacknowledged transaction (zero when none): the
// replication lag in time is how long ago that was.
func (t *tracker) oldestCommit() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range t.pending {
		if !m.acked {
			return m.commit
		}
	}
	return time.Time{}
}

// ack marks the transaction ending at end as durable and advances the flushed prefix.
func (t *tracker) ack(end pglogrepl.LSN) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.pending {
		if t.pending[i].end == end {
			t.pending[i].acked = true
			break
		}
	}
	for len(t.pending) > 0 && t.pending[0].acked {
		t.flushed = t.pending[0].end
		t.pending = t.pending[1:]
	}
}

// position returns the LSN to confirm. When nothing is outstanding, serverEnd (the WAL end the
// server reported) is confirmed so that an idle slot retains no WAL.
func (t *tracker) position(serverEnd pglogrepl.LSN, inTx bool) pglogrepl.LSN {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 && !inTx && serverEnd > t.flushed && t.delivered <= serverEnd {
		t.flushed = serverEnd
	}
	return t.flushed
}

// outstanding is the number of delivered, unacknowledged transactions.
func (t *tracker) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}
