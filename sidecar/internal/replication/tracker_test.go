package replication

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func TestTrackerConfirmsOnlyTheAcknowledgedPrefix(t *testing.T) {
	tr := newTracker(100)
	tr.deliver(200, time.Time{})
	tr.deliver(300, time.Time{})
	tr.deliver(400, time.Time{})
	if got := tr.position(1000, false); got != 100 {
		t.Fatalf("nothing acked: position %v, want 100", got)
	}
	tr.ack(300) // out of order: 200 still outstanding
	if got := tr.position(1000, false); got != 100 {
		t.Fatalf("ack of 300 before 200: position %v, want 100", got)
	}
	tr.ack(200)
	if got := tr.position(1000, false); got != 300 {
		t.Fatalf("200 and 300 acked: position %v, want 300", got)
	}
	tr.ack(400)
	if got := tr.position(350, false); got != 400 {
		t.Fatalf("all acked, server end behind: position %v, want 400", got)
	}
}

func TestTrackerConfirmsServerEndOnlyWhenIdle(t *testing.T) {
	tr := newTracker(100)
	if got := tr.position(500, true); got != 100 {
		t.Fatalf("inside a transaction: position %v, want 100", got)
	}
	if got := tr.position(500, false); got != 500 {
		t.Fatalf("idle: position %v, want the server end 500", got)
	}
	tr.deliver(600, time.Time{})
	if got := tr.position(pglogrepl.LSN(900), false); got != 500 {
		t.Fatalf("outstanding transaction: position %v, want 500", got)
	}
	if n := tr.outstanding(); n != 1 {
		t.Fatalf("outstanding = %d, want 1", n)
	}
}

func TestTrackerLagIsTheOldestUnacknowledgedCommit(t *testing.T) {
	tr := newTracker(100)
	first, second := time.Unix(1000, 0), time.Unix(2000, 0)
	tr.deliver(200, first)
	tr.deliver(300, second)
	if got := tr.oldestCommit(); !got.Equal(first) {
		t.Fatalf("oldest commit %v, want %v", got, first)
	}
	tr.ack(200)
	if got := tr.oldestCommit(); !got.Equal(second) {
		t.Fatalf("after acking the first: %v, want %v", got, second)
	}
	tr.ack(300)
	if got := tr.oldestCommit(); !got.IsZero() {
		t.Fatalf("nothing outstanding: %v, want zero", got)
	}
}
