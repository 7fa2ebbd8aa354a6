//go:build !linux

package proc

import "time"

var processStart = time.Now()

// BootTime stands in for CLOCK_BOOTTIME where there is none: time since this
// process started. Nothing is tracked on such systems; tests inject clocks.
func BootTime() time.Duration { return time.Since(processStart) }
