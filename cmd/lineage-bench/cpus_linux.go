package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// machineCPUs is how many CPUs the machine has online. runtime.NumCPU counts
// only the CPUs this process may run on, and scripts/bench.sh pins the
// benchmark to CPU 0, so it would say 1 and leave the spawner unpinned.
func machineCPUs() int {
	raw, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(raw)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || b < a {
			return runtime.NumCPU()
		}
		n += b - a + 1
	}
	return n
}
