package lineage

import "time"

// TicksPerSecond is USER_HZ, the unit of start times in /proc/PID/stat. It is
// 100 on every architecture Linux runs on (the kernel converts to it for
// user space whatever its internal HZ).
const TicksPerSecond = 100

// TickDuration is the length of one clock tick.
const TickDuration = time.Second / TicksPerSecond

// TicksToDuration turns clock ticks since boot into time since boot.
func TicksToDuration(ticks uint64) time.Duration { return time.Duration(ticks) * TickDuration }

// DurationToTicks turns time since boot into whole clock ticks, as the
// kernel rounds start times for /proc (down).
func DurationToTicks(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	return uint64(d / TickDuration)
}
