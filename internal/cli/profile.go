package cli

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
)

// profiles is what StartProfiles started, for StopProfiles.
var profiles struct {
	once sync.Once
	stop func()
}

// StartProfiles writes a CPU profile to $LINEAGE_CPUPROFILE and a block
// profile to $LINEAGE_BLOCKPROFILE, when set, for the whole run, until
// [StopProfiles]. It is how the reap's latency was profiled
// (docs/benchmarks.md). Call it once, from main.
func StartProfiles() {
	cpu, block := os.Getenv("LINEAGE_CPUPROFILE"), os.Getenv("LINEAGE_BLOCKPROFILE")
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "lineage: cpu profile: %v\n", err)
		} else {
			cpuFile = f
		}
	}
	if block != "" {
		runtime.SetBlockProfileRate(1)
	}
	profiles.stop = func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if block != "" {
			if err := writeProfile("block", block); err != nil {
				fmt.Fprintf(os.Stderr, "lineage: block profile: %v\n", err)
			}
		}
	}
}

// StopProfiles writes out the profiles StartProfiles started; it does so
// once, and is safe to call when none were. Call it before execve(2) too:
// the CPU profile's timer (ITIMER_PROF) survives an exec, and its SIGPROF
// would kill the program exec'd.
func StopProfiles() {
	profiles.once.Do(func() {
		if profiles.stop != nil {
			profiles.stop()
		}
	})
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup(name).WriteTo(f, 0)
}
