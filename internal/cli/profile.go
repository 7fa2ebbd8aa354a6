package cli

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// StartProfiles writes a CPU profile to $LINEAGE_CPUPROFILE and a block
// profile to $LINEAGE_BLOCKPROFILE, when set, for the whole run; the
// function it returns writes them out. It is how the reap's latency was
// profiled (docs/benchmarks.md).
func StartProfiles() (stop func()) {
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
	return func() {
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

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup(name).WriteTo(f, 0)
}
