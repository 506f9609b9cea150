package workspace

import "testing"

func TestDescribeLockWaits(t *testing.T) {
	if got := describeLockWaits(nil); got != "" {
		t.Errorf("no waits: %q, want empty", got)
	}
	got := describeLockWaits([]lockHeld{
		{Object: "table app.orders", Mode: "AccessShareLock", PID: 2150, Role: "app", State: "idle in transaction", TransactionAgeSec: 75},
		{Object: "table app.items", Mode: "AccessShareLock", PID: 2151, TransactionAgeSec: -1},
	})
	want := "the dump of the parent waits for table app.orders (AccessShareLock), held by session 2150 (role app, idle in transaction, " +
		"in a transaction for 1m15s); table app.items (AccessShareLock), held by session 2151; it goes on once the lock is released " +
		"(SELECT dataenv.cancel(id) gives up)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
