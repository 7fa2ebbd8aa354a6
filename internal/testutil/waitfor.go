package testutil

import (
	"testing"
	"time"
)

// WaitForTimeout bounds a WaitFor: long, since the machine may be loaded,
// and a condition met returns at once.
const WaitForTimeout = 30 * time.Second

// WaitFor polls cond until it holds, failing tb with what it waited for
// when it doesn't within WaitForTimeout.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitForTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("waited %v for %s", WaitForTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
