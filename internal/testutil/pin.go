package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

var pinSeq atomic.Uint64

// PinRoot returns a pin root of the test's own under /sys/fs/bpf (not yet
// created: the tracker creates it, mounting bpffs if need be), so that no
// two tests share kernel state through pins. When the test ends, whatever
// is still pinned there is removed, and the test fails if it can't be.
func PinRoot(tb testing.TB) string {
	tb.Helper()
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("lineage-test-%d-%d", os.Getpid(), pinSeq.Add(1)))
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("unpin test pin root: %v", err)
		}
	})
	return dir
}
