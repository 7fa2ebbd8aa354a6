package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/proc"
)

// BPFOptions size and tune the BPF backend. The zero value gives the
// defaults.
type BPFOptions struct {
	// MaxMembers is the capacity of the membership map: how many live
	// processes can be tracked at once, across all roots (default 65536).
	// When it is full, new processes escape and are counted as MembersFull.
	MaxMembers uint32
	// MaxRoots is how many roots can be registered at once (default 4096).
	MaxRoots uint32
	// RingBytes is the size of the event ring buffer, a power of two and a
	// multiple of the page size (default 1 MiB). Events that don't fit are
	// counted as EventsLost.
	RingBytes uint32
	// Poll is how often the reader looks for events the kernel did not
	// wake it for (default 100ms). Below a quarter full the kernel submits
	// without a wakeup, so a busy lineage costs no wakeup per event until
	// the reader falls behind; past that, every event forces one.
	Poll time.Duration
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
}

func (o *BPFOptions) withDefaults() BPFOptions {
	out := BPFOptions{}
	if o != nil {
		out = *o
	}
	if out.MaxMembers == 0 {
		out.MaxMembers = DefaultMaxMembers
	}
	if out.MaxRoots == 0 {
		out.MaxRoots = 4096
	}
	if out.RingBytes == 0 {
		out.RingBytes = 1 << 20
	}
	if out.Poll <= 0 {
		out.Poll = 100 * time.Millisecond
	}
	if out.ProcRoot == "" {
		out.ProcRoot = "/proc"
	}
	return out
}

// BPF is the backend that keeps membership in the kernel. Create it with
// [OpenBPF] and Close it when done: the program stays attached, and the
// machine pays its per-fork cost, until then. Keep it reachable while it
// must track: its file descriptors close, and tracking stops, if the
// garbage collector finalizes it.
type BPF struct {
	opts   BPFOptions
	objs   lineageObjects
	links  []link.Link
	reader *ringbuf.Reader
	proc   proc.FS
	kfuncs bool

	// spawnMu serialises Spawn: one armed thread at a time.
	spawnMu sync.Mutex
	// mapMu serialises read-modify-write sequences on the maps from user
	// space; the kernel side needs no lock.
	mapMu   sync.Mutex
	closeMu sync.Once
	// undecodable counts ring-buffer records Run could not decode.
	undecodable atomic.Uint64
}

var _ Backend = (*BPF)(nil)

// OpenBPF loads and attaches the BPF program. Errors that mean BPF can't
// run here wrap ErrUnavailable and say why.
func OpenBPF(opts *BPFOptions) (*BPF, error) {
	o := opts.withDefaults()
	if err := validateRing(o.RingBytes); err != nil {
		return nil, err
	}
	if err := ValidateMaxMembers(o.MaxMembers); err != nil {
		return nil, err
	}
	if o.MaxRoots < 1 {
		return nil, fmt.Errorf("%w option: max roots %d: must be at least 1", lineage.ErrInvalid, o.MaxRoots)
	}
	procFS, err := proc.Open(o.ProcRoot)
	if err != nil {
		return nil, err
	}
	if err := precheck(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, explainLoadError(fmt.Errorf("remove memlock limit: %w", err))
	}

	spec, err := loadLineage()
	if err != nil {
		return nil, fmt.Errorf("read bpf object: %w", err)
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, explainLoadError(fmt.Errorf("load kernel btf: %w", err))
	}
	groupDead := exitHasGroupDead(kernel)
	kfuncs := hasFuncs(kernel, "bpf_task_from_pid", "bpf_task_release", "bpf_send_signal_task")

	spec.Maps[lineageMapMembers].MaxEntries = o.MaxMembers
	spec.Maps[lineageMapRoots].MaxEntries = o.MaxRoots
	spec.Maps[lineageMapEvents].MaxEntries = o.RingBytes
	for name, value := range map[string]any{
		lineageVarSupervisorTgid:   uint32(os.Getpid()),
		lineageVarExitHasGroupDead: groupDead,
		lineageVarWakeupBytes:      o.RingBytes / 4,
	} {
		if err := spec.Variables[name].Set(value); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}

	b := &BPF{opts: o, proc: procFS, kfuncs: kfuncs}
	if err := spec.LoadAndAssign(&b.objs, &ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel},
	}); err != nil {
		return nil, explainLoadError(fmt.Errorf("load bpf program: %w", err))
	}
	for _, prog := range []*ebpf.Program{b.objs.HandleFork, b.objs.HandleExec, b.objs.HandleExit} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			b.Close()
			return nil, explainLoadError(fmt.Errorf("attach %s: %w", prog, err))
		}
		b.links = append(b.links, l)
	}
	b.reader, err = ringbuf.NewReader(b.objs.Events)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	return b, nil
}

func validateRing(n uint32) error {
	page := uint32(os.Getpagesize())
	if n < page || n&(n-1) != 0 {
		return fmt.Errorf("bpf backend: ring buffer size %d must be a power of two of at least %d bytes", n, page)
	}
	return nil
}

// exitHasGroupDead reports whether sched_process_exit passes group_dead
// (Linux 6.16+). Without it the program tests signal->live instead.
func exitHasGroupDead(kernel *btf.Spec) bool {
	typ, err := kernel.AnyTypeByName("btf_trace_sched_process_exit")
	if err != nil {
		return false
	}
	td, ok := typ.(*btf.Typedef)
	if !ok {
		return false
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	// The first parameter is the tracepoint's private data pointer.
	return ok && len(proto.Params) >= 3
}

func hasFuncs(kernel *btf.Spec, names ...string) bool {
	for _, name := range names {
		var fn *btf.Func
		if err := kernel.TypeByName(name, &fn); err != nil {
			return false
		}
	}
	return true
}

// Name implements Backend.
func (b *BPF) Name() string { return "bpf" }

// KernelContainment reports whether this kernel lets the BPF program kill a
// process other than the current one (kernel 6.13+): containment kills the
// new child at birth, and a lineage can die with its supervisor.
func (b *BPF) KernelContainment() bool { return b.kfuncs }

// Spawn implements Backend. It arms the calling OS thread so that the next
// process it forks becomes a root in the kernel's membership before it runs.
func (b *BPF) Spawn(cmd *exec.Cmd, opts RootOptions) (lineage.Identity, error) {
	b.spawnMu.Lock()
	defer b.spawnMu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	flags := uint32(0)
	if opts.DieWithSupervisor {
		flags |= uint32(lineageRootFlagROOT_F_DIE_WITH_SUPERVISOR)
	}
	if err := b.objs.SpawnRootFlags.Set(flags); err != nil {
		return lineage.Identity{}, fmt.Errorf("arm spawn: %w", err)
	}
	if err := b.objs.SpawnTid.Set(uint32(unix.Gettid())); err != nil {
		return lineage.Identity{}, fmt.Errorf("arm spawn: %w", err)
	}
	startErr := cmd.Start()
	if err := b.objs.SpawnTid.Set(uint32(0)); err != nil && startErr == nil {
		startErr = fmt.Errorf("disarm spawn: %w", err)
	}
	pid := uint32(0)
	if startErr == nil {
		pid = uint32(cmd.Process.Pid)
	}
	id, found := b.settleSpawned(pid)
	if startErr != nil {
		return lineage.Identity{}, startErr
	}
	if !found {
		// Not registered: the membership map is full, or the fork was not
		// seen. Nothing of the command may run untracked.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		st, _ := b.Stats()
		if st.MembersFull > 0 {
			return lineage.Identity{}, fmt.Errorf("spawn %s: membership map is full (%d members)", cmd.Path, b.opts.MaxMembers)
		}
		return lineage.Identity{}, fmt.Errorf("spawn %s: the kernel did not register the new process", cmd.Path)
	}
	return id, nil
}

// settleSpawned keeps the root the armed thread was meant to start (pid) and
// forgets any other process it forked meanwhile: the Go runtime may fork a
// short-lived probe of its own on the first start.
func (b *BPF) settleSpawned(pid uint32) (lineage.Identity, bool) {
	var (
		key    uint32
		r      lineageRoot
		ours   lineage.Identity
		found  bool
		others []lineage.Identity
	)
	it := b.objs.Roots.Iterate()
	for it.Next(&key, &r) {
		if r.Flags&lineageRootFlagROOT_F_SPAWNING == 0 {
			continue
		}
		id := lineage.Identity{PID: key, StartTicks: r.Start}
		if key == pid {
			ours, found = id, true
		} else {
			others = append(others, id)
		}
	}
	for _, id := range others {
		_ = b.Forget(id)
	}
	if found {
		var m lineageMember
		if err := b.objs.Members.Lookup(pid, &m); err != nil || m.Start != ours.StartTicks {
			// Already gone is fine (a command that exits at once); the
			// root entry still names it.
			if err == nil {
				found = false
			}
		}
		if err := b.setRootFlag(ours, lineageRootFlagROOT_F_SPAWNING, false); err != nil {
			found = false
		}
	}
	return ours, found
}

// Register implements Backend.
func (b *BPF) Register(id lineage.Identity, opts RootOptions) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if err := b.proc.Check(id); err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var existing lineageMember
	if err := b.objs.Members.Lookup(id.PID, &existing); err == nil && existing.Start == id.StartTicks {
		return fmt.Errorf("register %s: %w: member of root %d@%d", id, ErrAlreadyTracked, existing.RootPid, existing.RootStart)
	}
	r := lineageRoot{Start: id.StartTicks}
	if opts.DieWithSupervisor {
		r.Flags |= lineageRootFlagROOT_F_DIE_WITH_SUPERVISOR
	}
	if err := b.objs.Roots.Update(id.PID, &r, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("register %s: roots map: %w", id, err)
	}
	m := lineageMember{
		Start:     id.StartTicks,
		RootPid:   id.PID,
		RootStart: id.StartTicks,
		Flags:     lineageMemberFlagMEMBER_F_ROOT | lineageMemberFlagMEMBER_F_ADOPTED,
	}
	if st, err := b.proc.Stat(int(id.PID)); err == nil {
		if parent, err := b.proc.Identity(st.PPID); err == nil {
			m.ParentPid, m.ParentStart = parent.PID, parent.StartTicks
		}
	}
	if err := b.objs.Members.Update(id.PID, &m, ebpf.UpdateAny); err != nil {
		_ = b.objs.Roots.Delete(id.PID)
		return fmt.Errorf("register %s: members map: %w", id, err)
	}
	// The pid may have died, and even been reused, between the check and
	// the insert; from here on the kernel keeps the entry exact.
	if err := b.proc.Check(id); err != nil {
		_ = b.objs.Members.Delete(id.PID)
		_ = b.objs.Roots.Delete(id.PID)
		return fmt.Errorf("register %s: %w", id, err)
	}
	_, err := b.proc.Adopt(id, b.isMemberLocked, func(child lineage.Stat, parent lineage.Identity) error {
		cm := lineageMember{
			Start:       child.StartTicks,
			ParentPid:   parent.PID,
			ParentStart: parent.StartTicks,
			RootPid:     id.PID,
			RootStart:   id.StartTicks,
			Flags:       lineageMemberFlagMEMBER_F_ADOPTED,
		}
		return b.objs.Members.Update(child.PID, &cm, ebpf.UpdateAny)
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	return nil
}

func (b *BPF) isMemberLocked(id lineage.Identity) bool {
	var m lineageMember
	return b.objs.Members.Lookup(id.PID, &m) == nil && m.Start == id.StartTicks
}

// Members implements Backend. Entries written by the kernel are exact;
// entries written from user space are checked against /proc, and dropped if
// their process is gone.
func (b *BPF) Members(root lineage.Identity) ([]lineage.Member, error) {
	var (
		out   []lineage.Member
		pid   uint32
		m     lineageMember
		stale []lineage.Identity
	)
	it := b.objs.Members.Iterate()
	for it.Next(&pid, &m) {
		if m.RootPid != root.PID || m.RootStart != root.StartTicks {
			continue
		}
		id := lineage.Identity{PID: pid, StartTicks: m.Start}
		if m.Flags&lineageMemberFlagMEMBER_F_ADOPTED != 0 {
			if err := b.proc.Check(id); err != nil {
				stale = append(stale, id)
				continue
			}
		}
		out = append(out, lineage.Member{
			Identity:  id,
			Parent:    lineage.Identity{PID: m.ParentPid, StartTicks: m.ParentStart},
			Root:      root,
			Contained: m.Flags&lineageMemberFlagMEMBER_F_CONTAINED != 0,
		})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read members of %s: %w", root, err)
	}
	for _, id := range stale {
		b.deleteMember(id)
	}
	return out, nil
}

// deleteMember removes id's entry if it still names id.
func (b *BPF) deleteMember(id lineage.Identity) {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var m lineageMember
	if b.objs.Members.Lookup(id.PID, &m) == nil && m.Start == id.StartTicks {
		_ = b.objs.Members.Delete(id.PID)
	}
}

// Contain implements Backend.
func (b *BPF) Contain(root lineage.Identity) (lineage.Containment, error) {
	if err := b.setRootFlag(root, lineageRootFlagROOT_F_REAPING, true); err != nil {
		return "", err
	}
	if b.kfuncs {
		return lineage.ContainKernel, nil
	}
	return lineage.ContainKernelForker, nil
}

// SetDieWithSupervisor changes whether root's lineage is killed when this
// process dies before reaping it.
func (b *BPF) SetDieWithSupervisor(root lineage.Identity, on bool) error {
	return b.setRootFlag(root, lineageRootFlagROOT_F_DIE_WITH_SUPERVISOR, on)
}

func (b *BPF) setRootFlag(root lineage.Identity, flag lineageRootFlag, on bool) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var r lineageRoot
	if err := b.objs.Roots.Lookup(root.PID, &r); err != nil || r.Start != root.StartTicks {
		return fmt.Errorf("root %s: %w", root, ErrNotRoot)
	}
	if on {
		r.Flags |= flag
	} else {
		r.Flags &^= flag
	}
	if err := b.objs.Roots.Update(root.PID, &r, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("root %s: update: %w", root, err)
	}
	return nil
}

// Forget implements Backend.
func (b *BPF) Forget(root lineage.Identity) error {
	b.mapMu.Lock()
	var r lineageRoot
	if err := b.objs.Roots.Lookup(root.PID, &r); err != nil || r.Start != root.StartTicks {
		b.mapMu.Unlock()
		return fmt.Errorf("forget %s: %w", root, ErrNotRoot)
	}
	_ = b.objs.Roots.Delete(root.PID)
	b.mapMu.Unlock()

	var (
		pid  uint32
		m    lineageMember
		gone []lineage.Identity
	)
	it := b.objs.Members.Iterate()
	for it.Next(&pid, &m) {
		if m.RootPid == root.PID && m.RootStart == root.StartTicks {
			gone = append(gone, lineage.Identity{PID: pid, StartTicks: m.Start})
		}
	}
	for _, id := range gone {
		b.deleteMember(id)
	}
	return it.Err()
}

// Stats implements Backend.
func (b *BPF) Stats() (Stats, error) {
	st := Stats{Undecodable: b.undecodable.Load()}
	fields := map[lineageStat]*uint64{
		lineageStatSTAT_EVENTS_LOST:      &st.EventsLost,
		lineageStatSTAT_MEMBERS_FULL:     &st.MembersFull,
		lineageStatSTAT_FORKS:            &st.Forks,
		lineageStatSTAT_EXECS:            &st.Execs,
		lineageStatSTAT_EXITS:            &st.Exits,
		lineageStatSTAT_CONTAINED:        &st.Contained,
		lineageStatSTAT_SUPERVISOR_KILLS: &st.SupervisorKills,
		lineageStatSTAT_SIGNAL_FAILED:    &st.SignalFailed,
		lineageStatSTAT_STALE:            &st.Stale,
	}
	for key, dst := range fields {
		var perCPU []uint64
		if err := b.objs.Stats.Lookup(key, &perCPU); err != nil {
			return Stats{}, fmt.Errorf("read stats: %w", err)
		}
		for _, v := range perCPU {
			*dst += v
		}
	}
	return st, nil
}

// Run implements Backend.
func (b *BPF) Run(ctx context.Context, fn func(lineage.Event)) error {
	// Wake the reader as soon as ctx is done, rather than at its next poll.
	stop := context.AfterFunc(ctx, func() { _ = b.reader.Flush() })
	defer stop()
	var rec ringbuf.Record
	for {
		done := ctx.Err() != nil
		if done {
			// Deliver what is pending, then stop.
			b.reader.SetDeadline(time.Now())
		} else {
			b.reader.SetDeadline(time.Now().Add(b.opts.Poll))
		}
		err := b.reader.ReadInto(&rec)
		switch {
		case err == nil:
			ev, derr := decode(rec.RawSample)
			if derr != nil {
				// Only a mismatch between this binary and the loaded
				// objects can cause it: count it, never fail on it.
				b.undecodable.Add(1)
				continue
			}
			fn(ev)
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
			if done {
				return nil
			}
		case errors.Is(err, ringbuf.ErrClosed):
			return nil
		default:
			return fmt.Errorf("read events: %w", err)
		}
	}
}

// Close implements Backend.
func (b *BPF) Close() error {
	var errs []error
	b.closeMu.Do(func() {
		if b.reader != nil {
			errs = append(errs, b.reader.Close())
		}
		for _, l := range b.links {
			errs = append(errs, l.Close())
		}
		errs = append(errs, b.objs.Close())
	})
	return errors.Join(errs...)
}
