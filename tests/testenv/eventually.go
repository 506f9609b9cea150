package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 20 ms until it holds, and fails the test if it still does not
// after timeout: a wait on a condition (the timeout only guards against a hang), never a timing
// assertion.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
