package proc

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// BootTime returns the time since boot (CLOCK_BOOTTIME), the clock that
// start times in /proc and the BPF tracker's timestamps are measured on.
// clock_gettime can't fail for this clock on any kernel lineage runs on, so
// a failure panics rather than hand out a time that would corrupt every
// identity comparison.
func BootTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	return time.Duration(ts.Nano())
}
