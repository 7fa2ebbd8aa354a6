package testutil

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Until polls cond every few milliseconds until it holds, for at most
// timeout (scaled by [WaitScale]), and reports whether it came to hold. It is
// for helper processes, which have no testing.TB; a test uses
// [Eventually].
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout * WaitScale())
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(wait)
	}
	return true
}

// Eventually waits until cond holds, for at most timeout (scaled by
// [WaitScale]), and fails tb at once, saying what it waited for, if it never
// does. It is how a test waits for the other side: never a fixed sleep,
// never a deadline loop of its own.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Until(timeout, cond) {
		tb.Fatalf("waited %v for %s: it never happened", timeout*WaitScale(), what)
	}
}

// WaitScale is the factor by which tests scale their waits: 1, or
// $LINEAGE_TEST_WAIT_SCALE (an integer of at least 1) on a machine that is known
// to be slow or loaded (make test-hog sets it). A wait only bounds how long
// a test may take to fail; a passing test never waits that long.
func WaitScale() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("LINEAGE_TEST_WAIT_SCALE")); err == nil && n > 1 {
		return time.Duration(n)
	}
	return 1
}
