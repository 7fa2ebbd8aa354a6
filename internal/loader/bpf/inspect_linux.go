package bpf

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// The reaper's batch programs (bpf/inspect.c): inspect, what
// /proc/PID/stat shows of many processes, read by one run of a syscall
// program instead of a file per process; and signal_batch, a signal to
// many identities in one run, each checked and signalled while the kernel
// holds its task. They are loaded apart from the tracking programs and
// from each other, share no map with the tracker and are never pinned: a
// kernel that refuses one (its syscall programs may not call the kfuncs)
// tracks all the same, and the reaper reads /proc or signals by pidfd.

var (
	_ loader.Inspector      = (*Tracker)(nil)
	_ loader.KernelSignaler = (*Tracker)(nil)
)

// inspector holds the loaded batch programs and their batch, mapped into
// memory. Its lock serialises runs: the batch is one buffer.
type inspector struct {
	mu          sync.Mutex
	inspectProg *ebpf.Program
	signal      *ebpf.Program // nil when the kernel refused it; signalOff says why
	batchMap    *ebpf.Map
	mem         *ebpf.Memory
	// batch is copied to and from mem: its Go type has the C layout.
	batch     inspectBatch
	signalOff string
}

// The batch's size for n processes, and how many one run takes.
const (
	inspectMax = len(inspectBatch{}.Procs)
)

func batchSize(n int) int {
	return int(unsafe.Offsetof(inspectBatch{}.Procs)) + n*int(unsafe.Sizeof(inspectProcStat{}))
}

// loadInspector loads the inspect program and its batch, then the
// signal program beside them (a refusal of which it only records), or says
// why it can't. killUser bounds what signal_batch signals, as the
// tracker's own kills are bounded.
func loadInspector(kernel *btf.Spec, killUser *policy.KillUser) (*inspector, error) {
	spec, err := loadInspect()
	if err != nil {
		return nil, err
	}
	if u := killUser; u != nil {
		for name, value := range map[string]any{
			inspectVarKillUidBounded:   true,
			inspectVarKillUidReal:      u.Real,
			inspectVarKillUidEffective: u.Effective,
		} {
			if err := spec.Variables[name].Set(value); err != nil {
				return nil, fmt.Errorf("set %s: %w", name, err)
			}
		}
	}
	var objs struct {
		Inspect   *ebpf.Program `ebpf:"inspect"`
		Inspected *ebpf.Map     `ebpf:"inspected"`
	}
	opts := &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}}
	if err := spec.LoadAndAssign(&objs, opts); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	in := &inspector{inspectProg: objs.Inspect, batchMap: objs.Inspected}
	if in.mem, err = in.batchMap.Memory(); err != nil {
		_ = in.close()
		return nil, fmt.Errorf("map the batch: %w", err)
	}
	if got, want := int(in.mem.Size()), batchSize(inspectMax); got < want {
		_ = in.close()
		return nil, fmt.Errorf("the batch maps %d bytes, not %d", got, want)
	}
	var sig struct {
		SignalBatch *ebpf.Program `ebpf:"signal_batch"`
	}
	opts.MapReplacements = map[string]*ebpf.Map{inspectMapInspected: in.batchMap}
	if err := spec.LoadAndAssign(&sig, opts); err != nil {
		in.signalOff = fmt.Sprintf("the kernel refused the batch signal: %v", err)
	} else {
		in.signal = sig.SignalBatch
	}
	return in, nil
}

func (in *inspector) close() error {
	return errors.Join(in.inspectProg.Close(), in.signal.Close(), in.batchMap.Close())
}

// startInspector loads b's batch programs; it records in b.inspectOff why
// it has none, and fails nothing.
func (b *Tracker) startInspector(kernel *btf.Spec) {
	in, err := loadInspector(kernel, b.opts.KillUser)
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
	if err := in.runBatch(in.inspectProg, len(pids)); err != nil {
		return err
	}
	for i := range pids {
		out[i] = statOf(&in.batch.Procs[i])
	}
	return nil
}

// runBatch copies the first n processes of in.batch to the mapped batch,
// runs prog over them, and copies what it wrote back.
func (in *inspector) runBatch(prog *ebpf.Program, n int) error {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&in.batch)), batchSize(n))
	if _, err := in.mem.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write the batch: %w", err)
	}
	ret, err := prog.Run(&ebpf.RunOptions{})
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if ret != 0 {
		return fmt.Errorf("run: the program found no batch (%d)", ret)
	}
	if _, err := in.mem.ReadAt(b, 0); err != nil {
		return fmt.Errorf("read the batch: %w", err)
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
// long as pids). A pid that no task has gets a zero Stat; PGRP, Session and
// ArgEnd are left zero. Pids are those of the initial pid namespace. It is
// safe for concurrent use; it fails when the kernel refused the program
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

// SignalBatch implements loader.KernelSignaler: one run of signal_batch per
// 4096 identities.
func (b *Tracker) SignalBatch(ids []lineage.Identity, sigs []syscall.Signal, before []lineage.Stat, errs []error) error {
	if len(sigs) != len(ids) || len(before) != len(ids) || len(errs) != len(ids) {
		return fmt.Errorf("%w signal batch: %d identities, %d signals, room for %d stats and %d errors", lineage.ErrInvalid, len(ids), len(sigs), len(before), len(errs))
	}
	if ok, why := b.Signals(); !ok {
		return fmt.Errorf("signal batch: %s", why)
	}
	in := b.inspector
	in.mu.Lock()
	defer in.mu.Unlock()
	for len(ids) > 0 {
		n := min(len(ids), inspectMax)
		if err := in.signalRun(ids[:n], sigs[:n], before[:n], errs[:n]); err != nil {
			return err
		}
		ids, sigs, before, errs = ids[n:], sigs[n:], before[n:], errs[n:]
	}
	return nil
}

// Signals reports whether [Tracker.SignalBatch] works here, and if not, why.
func (b *Tracker) Signals() (bool, string) {
	switch {
	case b.inspector == nil:
		return false, b.inspectOff
	case b.inspector.signal == nil:
		return false, b.inspector.signalOff
	}
	return true, ""
}

func (in *inspector) signalRun(ids []lineage.Identity, sigs []syscall.Signal, before []lineage.Stat, errs []error) error {
	in.batch.N = uint32(len(ids))
	for i, id := range ids {
		in.batch.Procs[i] = inspectProcStat{Pid: id.PID, WantStart: id.StartTicks, Sig: int32(sigs[i])}
	}
	if err := in.runBatch(in.signal, len(ids)); err != nil {
		return err
	}
	for i, id := range ids {
		p := &in.batch.Procs[i]
		before[i] = statOf(p)
		errs[i] = signalErr(id, syscall.Signal(p.Sig), syscall.Errno(-p.Err))
	}
	return nil
}

// signalErr is what signal_batch said of id, as an error: nil when sent.
func signalErr(id lineage.Identity, sig syscall.Signal, errno syscall.Errno) error {
	switch errno {
	case 0:
		return nil
	case syscall.ESRCH:
		return fmt.Errorf("signal %s: %w", id, lineage.ErrNoProcess)
	case syscall.ESTALE:
		return fmt.Errorf("signal %s: the pid names another process now: %w", id, lineage.ErrIdentityMismatch)
	case syscall.EPERM:
		return fmt.Errorf("signal %s: a kernel thread, or the kernel refused %s: %w", id, lineage.SignalName(sig), errno)
	case syscall.EACCES:
		return fmt.Errorf("signal %s: the invoking user could not send it %s by kill(2): %w", id, lineage.SignalName(sig), errno)
	}
	return fmt.Errorf("signal %s %s: %w", id, lineage.SignalName(sig), errno)
}
