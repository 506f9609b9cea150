package dispatch

import (
	"github.com/google/uuid"

	"github.com/dataenv/dataenv/sidecar/internal/request"
)

// Signals let tests wait for the dispatcher's transitions instead of sleeping (river's
// rivershared/testsignal is the model). Production leaves Config.Signals nil, and every send is
// then a no-op; a set channel that is full drops the event rather than stall the dispatcher.
type Signals struct {
	Claimed  chan Event // a claim committed: running with a new attempt
	Deferred chan Event // a claim matched no row and will be tried again (Reason says why)
	LetGo    chan Event // a claim matched no row because the row moved on (Reason says how)
	Retrying chan Event // a handler hit a transient fault; a new attempt follows after a backoff
	Written  chan Event // an outcome committed
	Stale    chan Event // an outcome was dropped: its row moved on
	Queued   chan Event // a waiting job was told its queue position (Reason is the text)
}

// Event is one transition of one request.
type Event struct {
	Request uuid.UUID
	Attempt int
	Reason  string
	Status  request.Status // Written, Stale: the outcome's status
}

// NewSignals returns signals with every channel buffered.
func NewSignals() *Signals {
	mk := func() chan Event { return make(chan Event, 1024) }
	return &Signals{Claimed: mk(), Deferred: mk(), LetGo: mk(), Retrying: mk(), Written: mk(), Stale: mk(), Queued: mk()}
}

// send delivers ev on the channel pick chooses, if signals are set up.
func (s *Signals) send(pick func(*Signals) chan Event, ev Event) {
	if s == nil {
		return
	}
	ch := pick(s)
	if ch == nil {
		return
	}
	select {
	case ch <- ev:
	default:
	}
}

func sigClaimed(s *Signals) chan Event  { return s.Claimed }
func sigDeferred(s *Signals) chan Event { return s.Deferred }
func sigLetGo(s *Signals) chan Event    { return s.LetGo }
func sigRetrying(s *Signals) chan Event { return s.Retrying }
func sigWritten(s *Signals) chan Event  { return s.Written }
func sigStale(s *Signals) chan Event    { return s.Stale }
func sigQueued(s *Signals) chan Event   { return s.Queued }
