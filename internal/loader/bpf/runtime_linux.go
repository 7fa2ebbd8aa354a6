package bpf

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ProgramRuntime is how much CPU time the kernel has spent in the tracker's
// programs, and how many times they ran, while run-time statistics were on.
type ProgramRuntime struct {
	Runtime time.Duration
	Runs    uint64
}

// EnableRuntimeStats turns on the kernel's accounting of BPF program run
// time (BPF_ENABLE_STATS) until the returned Closer is closed. It costs a
// little on every program run, machine-wide, so only benchmarks use it.
// Needs CAP_SYS_ADMIN.
func EnableRuntimeStats() (io.Closer, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return nil, fmt.Errorf("enable bpf run-time stats: %w", err)
	}
	return c, nil
}

// Runtime sums the run time and run count of the tracker's programs.
func (b *Tracker) Runtime() (ProgramRuntime, error) {
	var total ProgramRuntime
	var errs []error
	for _, p := range []*ebpf.Program{b.objs.HandleFork, b.objs.HandleExec, b.objs.HandleExit} {
		st, err := p.Stats()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		total.Runtime += st.Runtime
		total.Runs += st.RunCount
	}
	if err := errors.Join(errs...); err != nil {
		return total, fmt.Errorf("read program stats: %w", err)
	}
	return total, nil
}
