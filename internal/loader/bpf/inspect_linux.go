package bpf

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// The reaper's batch check (bpf/inspect.c): what /proc/PID/stat shows of
// many processes, read by one run of a syscall program instead of a file
// per process. It is loaded apart from the tracking programs, shares no map
// with them and is never pinned; a kernel that refuses it (one whose
// syscall programs may not call bpf_task_from_pid) tracks all the same, and
// the reaper reads /proc.

// inspector is a loaded inspect program and its batch, mapped into memory.
// Its lock serialises runs: the batch is one buffer.
type inspector struct {
	mu   sync.Mutex
	objs inspectObjects
	mem  *ebpf.Memory
	// batch is copied to and from mem: its Go type has the C layout.
	batch inspectBatch
}

// The batch's size for n processes, and how many one run takes.
const (
	inspectMax = len(inspectBatch{}.Procs)
)

func batchSize(n int) int {
	return int(unsafe.Offsetof(inspectBatch{}.Procs)) + n*int(unsafe.Sizeof(inspectProcStat{}))
}

// loadInspector loads the inspect program, or says why it can't.
func loadInspector(kernel *btf.Spec) (*inspector, error) {
	spec, err := loadInspect()
	if err != nil {
		return nil, err
	}
	in := &inspector{}
	if err := spec.LoadAndAssign(&in.objs, &ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel},
	}); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if in.mem, err = in.objs.Inspected.Memory(); err != nil {
		_ = in.objs.Close()
		return nil, fmt.Errorf("map the batch: %w", err)
	}
	if got, want := int(in.mem.Size()), batchSize(inspectMax); got < want {
		_ = in.objs.Close()
		return nil, fmt.Errorf("the batch maps %d bytes, not %d", got, want)
	}
	return in, nil
}

func (in *inspector) close() error { return in.objs.Close() }

// startInspector loads b's batch check; it records in b.inspectOff why it
// has none, and fails nothing.
func (b *Tracker) startInspector(kernel *btf.Spec) {
	in, err := loadInspector(kernel)
	if err != nil {
		b.inspectOff = fmt.Sprintf("the kernel refused the batch check: %v", err)
		return
	}
	b.inspector = in
}

// inspect fills out[i] with what /proc/PID/stat shows of pids[i], up to
// inspectMax of them per run.
func (in *inspector) inspect(pids []uint32, out []lineage.Stat) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(pids) > 0 {
		n := min(len(pids), inspectMax)
		if err := in.run(pids[:n], out[:n]); err != nil {
			return err
		}
		pids, out = pids[n:], out[n:]
	}
	return nil
}

func (in *inspector) run(pids []uint32, out []lineage.Stat) error {
	in.batch.N = uint32(len(pids))
	for i, pid := range pids {
		in.batch.Procs[i] = inspectProcStat{Pid: pid}
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&in.batch)), batchSize(len(pids)))
	if _, err := in.mem.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write the batch: %w", err)
	}
	ret, err := in.objs.Inspect.Run(&ebpf.RunOptions{})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if ret != 0 {
		return fmt.Errorf("run: the program found no batch (%d)", ret)
	}
	if _, err := in.mem.ReadAt(b, 0); err != nil {
		return fmt.Errorf("read the batch: %w", err)
	}
	for i := range pids {
		out[i] = statOf(&in.batch.Procs[i])
	}
	return nil
}

// statOf is p as the proc package's reader would have parsed the stat
// line; a pid no task had is the zero Stat.
func statOf(p *inspectProcStat) lineage.Stat {
	if p.Flags&inspectProcFlagINSPECT_F_FOUND == 0 {
		return lineage.Stat{}
	}
	comm := make([]byte, 0, len(p.Comm))
	for _, c := range p.Comm {
		if c == 0 {
			break
		}
		comm = append(comm, byte(c))
	}
	return lineage.Stat{
		Identity:   lineage.Identity{PID: p.Pid, StartTicks: p.Start},
		PPID:       int(p.Ppid),
		State:      string(rune(byte(p.State))),
		Comm:       string(comm),
		Kernel:     p.Flags&inspectProcFlagINSPECT_F_KERNEL != 0,
		Exiting:    p.Flags&inspectProcFlagINSPECT_F_EXITING != 0,
		Threads:    int(p.Threads),
		StartStack: p.StartStack,
		ExitCode:   lineage.ExitStatus(p.ExitCode),
		SigIgnore:  p.SigIgnore,
		SigCatch:   p.SigCatch,
	}
}

// Inspect reads, in one run of the kernel's inspect program per 4096 pids,
// what /proc/PID/stat shows of each of pids at that moment, into out (as
// long as pids). A pid that no task has gets a zero Stat; PGRP and Session
// are left zero. Pids are those of the initial pid namespace. It is safe
// for concurrent use; it fails when the kernel refused the program
// ([Tracker.Inspects]).
func (b *Tracker) Inspect(pids []uint32, out []lineage.Stat) error {
	if len(out) != len(pids) {
		return fmt.Errorf("%w inspect: %d pids, room for %d", lineage.ErrInvalid, len(pids), len(out))
	}
	if b.inspector == nil {
		return fmt.Errorf("inspect: %s", b.inspectOff)
	}
	return b.inspector.inspect(pids, out)
}

// Inspects reports whether [Tracker.Inspect] works here, and if not, why.
func (b *Tracker) Inspects() (bool, string) { return b.inspector != nil, b.inspectOff }
