package bpf

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// Options size and tune the BPF backend. The zero value gives the
// defaults.
type Options struct {
	// MaxMembers is the capacity of the membership map: how many live
	// processes can be tracked at once, across all roots (default 65536).
	// When it is full, new processes are counted as MembersFull and
	// handled as OnFull says.
	MaxMembers uint32
	// OnFull says what happens to a new process the full membership map
	// can't hold: OnFullKill (the default, also for "") or OnFullEscape.
	OnFull loader.OnFull
	// MaxRoots is how many roots can be registered at once (default 4096).
	MaxRoots uint32
	// RingBytes is the size of the event ring buffer, a power of two from
	// a page to loader.MaxRingBytes (default loader.DefaultRingBytes).
	// Events that don't fit are counted as EventsLost, and the latest of
	// them logged (Gaps).
	RingBytes uint32
	// Poll is how often the reader looks for events the kernel did not
	// wake it for (default 100ms). Below a quarter full the kernel submits
	// without a wakeup, so a busy lineage costs no wakeup per event until
	// the reader falls behind; past that, every event forces one.
	Poll time.Duration
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
	// Variant forces a build of the program (tests run each on one
	// kernel); VariantAuto, the default, takes $LINEAGE_BPF_VARIANT
	// (VariantEnv) when it is set, and otherwise lets the kernel's
	// features pick. A forced variant the kernel lacks a feature for fails
	// to open, wrapping ErrVariantUnsupported.
	Variant loader.Variant
	// PinRoot, when set, pins the tracker under PinRoot/v<LayoutVersion>
	// (see [Pinned]): its maps and program links outlive this process,
	// so the kernel tracks on, and the next Open with the same PinRoot
	// takes the set over (its sizes win over MaxMembers and RingBytes)
	// rather than loading afresh. A set of another layout found there is
	// moved into a new one and unpinned. A pinned tracker never kills a
	// lineage when its process dies: DieWithSupervisor has no effect, and
	// HardCancel is HardCancelNone. Only [Unpin] ends the tracking.
	PinRoot string

	// layout overrides LayoutVersion, for tests of migration.
	layout uint32
	// KillUser bounds every kill the kernel side makes (containment, the
	// hard cancel, untracked processes) as kill(2) bounds that user: a
	// process is killed only if its real or saved uid is the user's real
	// or effective uid; the others are skipped and counted
	// (Stats.UIDSpared). Nil takes this process's own user
	// ([policy.InvokingUser]): no bound as root, the user who ran lineage
	// under a setcap install.
	KillUser *policy.KillUser
}

// Validate checks opts as [Open] does before it loads anything, and
// touches nothing: errors wrap lineage.ErrInvalid. It is what lets a
// caller refuse bad BPF options before a fallback to another backend could
// hide them. A nil opts is the defaults.
func (o *Options) Validate() error {
	_, err := o.resolve()
	return err
}

// resolve returns opts with the defaults filled in, checked.
func (o *Options) resolve() (Options, error) {
	out := o.withDefaults()
	if err := loader.ValidateRingBytes(out.RingBytes); err != nil {
		return Options{}, err
	}
	if err := loader.ValidateMaxMembers(out.MaxMembers); err != nil {
		return Options{}, err
	}
	var err error
	if out.OnFull, err = loader.ParseOnFull(string(out.OnFull)); err != nil {
		return Options{}, err
	}
	if out.MaxRoots < 1 {
		return Options{}, fmt.Errorf("%w option: max roots %d: must be at least 1", lineage.ErrInvalid, out.MaxRoots)
	}
	if out.Variant == loader.VariantAuto {
		out.Variant = loader.Variant(os.Getenv(loader.VariantEnv))
	}
	if out.Variant, err = loader.ParseVariant(string(out.Variant)); err != nil {
		return Options{}, err
	}
	if err := CheckPinRoot(out.PinRoot); err != nil {
		return Options{}, err
	}
	return out, nil
}

func (o *Options) withDefaults() Options {
	out := Options{}
	if o != nil {
		out = *o
	}
	if out.MaxMembers == 0 {
		out.MaxMembers = loader.DefaultMaxMembers
	}
	if out.MaxRoots == 0 {
		out.MaxRoots = 4096
	}
	if out.RingBytes == 0 {
		out.RingBytes = loader.DefaultRingBytes
	}
	if out.Poll <= 0 {
		out.Poll = 100 * time.Millisecond
	}
	if out.ProcRoot == "" {
		out.ProcRoot = "/proc"
	}
	if out.KillUser == nil {
		out.KillUser = policy.InvokingUser(os.Getuid(), os.Geteuid())
	}
	return out
}

// BPF is the backend that keeps membership in the kernel. Create it with
// [Open] and Close it when done: the program stays attached, and the
// machine pays its per-fork cost, until then (and, when it is pinned, until
// [Unpin]). Keep it reachable while it
// must track: its file descriptors close, and tracking stops, if the
// garbage collector finalizes it.
type Tracker struct {
	opts  Options
	objs  lineageObjects
	links []link.Link
	// catcher is the second fork hook's link, when it runs; catcherOff
	// says why it does not (catch_linux.go).
	catcher    link.Link
	catcherOff string
	// inspector is the reaper's batch check, when the kernel took it;
	// inspectOff says why not (inspect_linux.go).
	inspector  *inspector
	inspectOff string
	reader     *ringbuf.Reader
	// backlog are the rings of sets moved into this one, to read before
	// reader (keepBacklog); backlogMu guards it (Run and Close).
	backlog   []backlogRing
	backlogMu sync.Mutex
	proc      proc.FS
	loaded    loader.Loaded
	// bss is the program's .bss map, which a pinned set shares.
	bss *ebpf.Map
	// pinned is set when the tracker is pinned; pinLock, an flock on the
	// pin root, keeps other trackers from taking the set over meanwhile.
	pinned  *Pinned
	pinLock *os.File

	// spawnMu serialises Spawn: one armed thread at a time.
	spawnMu sync.Mutex
	// mapMu serialises read-modify-write sequences on the maps from user
	// space; the kernel side needs no lock.
	mapMu   sync.Mutex
	closeMu sync.Once
	// sweeps shares passes over the members map between concurrent
	// listings.
	sweeps sweeps[[]memberEntry]
	// undecodable counts ring-buffer records Run could not decode.
	undecodable atomic.Uint64
	// syncs are the callers of Sync waiting for Run.
	syncs syncWaiters
	// adopted counts members adopted from /proc after skipped forks,
	// orphans those of them that were this process's children.
	adopted, orphans atomic.Uint64
	// ownMu guards own: read-locked across an adoption of orphans, so that
	// a helper being started is known before any listing could see it.
	ownMu sync.RWMutex
	own   owned
	// unattributed holds the orphans (identities) no one spawned root
	// could claim; unattributedCount counts them.
	unattributed      sync.Map
	unattributedCount atomic.Uint64
	// gaps places the events the kernel dropped (gaps_linux.go).
	gaps gapLog
	// stopLease ends the renewal of the reaper's lease (lease_linux.go);
	// a handoff writes the lease through leaseMem, at leaseOff.
	stopLease chan struct{}
	leaseMem  *ebpf.Memory
	leaseOff  int64
}

var _ loader.Backend = (*Tracker)(nil)

// Open loads and attaches the BPF program: the variant this kernel
// accepts (see [Variant]), unless opts force one. Errors that mean BPF can't
// run here wrap ErrUnavailable and say what failed.
func Open(opts *Options) (*Tracker, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	procFS, err := proc.Open(o.ProcRoot)
	if err != nil {
		return nil, err
	}
	host := loader.ProbeHost()
	if err := host.Check(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, explainLoadError(o.Variant, host, fmt.Errorf("remove memlock limit: %w", err))
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, explainLoadError(o.Variant, host, fmt.Errorf("load kernel btf: %w", err))
	}
	features := probeFeatures(kernel)
	loaded, err := features.Resolve(o.Variant)
	if err != nil {
		return nil, err
	}
	if o.PinRoot != "" {
		// The program outlives its loader: no process's death may kill.
		loaded.HardCancel = loader.HardCancelNone
	}
	spec, err := variantSpec(loaded, o)
	if err != nil {
		return nil, err
	}
	b := &Tracker{opts: o, proc: procFS, loaded: loaded}
	if o.PinRoot != "" {
		err = b.openPinned(spec, kernel, features)
	} else {
		err = b.load(spec, kernel)
	}
	if err == nil {
		b.stopLease = make(chan struct{})
		err = b.keepLease(b.stopLease)
	}
	if err != nil {
		b.Close()
		return nil, explainLoadError(b.loaded.Variant, host, err)
	}
	return b, nil
}

// variantSpec returns the variant's program, sized and configured.
func variantSpec(l loader.Loaded, o Options) (*ebpf.CollectionSpec, error) {
	load := loadLineage
	if l.Variant == loader.VariantCompat {
		load = loadLineageCompat
	}
	spec, err := load()
	if err != nil {
		return nil, fmt.Errorf("read %s bpf object: %w", l.Variant, err)
	}
	spec.Maps[lineageMapMembers].MaxEntries = o.MaxMembers
	spec.Maps[lineageMapRoots].MaxEntries = o.MaxRoots
	spec.Maps[lineageMapEvents].MaxEntries = o.RingBytes
	for name, value := range map[string]any{
		lineageVarSupervisorTgid:     uint32(os.Getpid()),
		lineageVarExitHasGroupDead:   l.GroupDead,
		lineageVarKillWithSupervisor: l.HardCancel == loader.HardCancelKernel && o.PinRoot == "",
		lineageVarWakeupBytes:        o.RingBytes / 4,
		lineageVarKillUntracked:      o.OnFull != loader.OnFullEscape,
		lineageVarKillUidBounded:     o.KillUser != nil,
	} {
		if err := spec.Variables[name].Set(value); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	if u := o.KillUser; u != nil {
		if err := spec.Variables[lineageVarKillUidReal].Set(u.Real); err != nil {
			return nil, fmt.Errorf("set %s: %w", lineageVarKillUidReal, err)
		}
		if err := spec.Variables[lineageVarKillUidEffective].Set(u.Effective); err != nil {
			return nil, fmt.Errorf("set %s: %w", lineageVarKillUidEffective, err)
		}
	}
	return spec, nil
}

// load loads spec into b's objects, attaches its programs and opens the
// reader. On error, b holds what was made so far, for Close.
func (b *Tracker) load(spec *ebpf.CollectionSpec, kernel *btf.Spec) error {
	// The second fork hook loads apart (attachCatcher).
	var objs struct {
		lineageMaps
		lineageVariables
		HandleFork *ebpf.Program `ebpf:"handle_fork"`
		HandleExec *ebpf.Program `ebpf:"handle_exec"`
		HandleExit *ebpf.Program `ebpf:"handle_exit"`
		Bss        *ebpf.Map     `ebpf:".bss"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel},
	}); err != nil {
		return fmt.Errorf("load bpf program: %w", err)
	}
	b.objs.lineageMaps, b.objs.lineageVariables, b.bss = objs.lineageMaps, objs.lineageVariables, objs.Bss
	b.objs.HandleFork, b.objs.HandleExec, b.objs.HandleExit = objs.HandleFork, objs.HandleExec, objs.HandleExit
	for _, prog := range []*ebpf.Program{b.objs.HandleFork, b.objs.HandleExec, b.objs.HandleExit} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return fmt.Errorf("attach %s: %w", prog, err)
		}
		b.links = append(b.links, l)
	}
	b.attachCatcher(spec, kernel)
	b.startInspector(kernel)
	var err error
	if b.reader, err = ringbuf.NewReader(b.objs.Events); err != nil {
		return fmt.Errorf("open ring buffer: %w", err)
	}
	return b.startGaps()
}

// Name implements Backend.
func (b *Tracker) Name() string { return "bpf" }

// Loaded says which program variant the kernel accepted and what it does.
func (b *Tracker) Loaded() loader.Loaded {
	l := b.loaded
	l.Batch.Check, l.Batch.CheckOff = b.Inspects()
	l.Batch.Signal, l.Batch.SignalOff = b.Signals()
	return l
}

// Variant is the program variant loaded.
func (b *Tracker) Variant() loader.Variant { return b.loaded.Variant }

// Containment says how [BPF.Contain] keeps a reaping lineage from growing:
// lineage.ContainKernel (a member's new child is killed at birth) or
// lineage.ContainKernelForker (the forking member is killed).
func (b *Tracker) Containment() lineage.Containment { return b.loaded.Containment }

// HardCancel says what ends a lineage registered with DieWithSupervisor
// when this process is SIGKILLed: HardCancelKernel or HardCancelNone.
func (b *Tracker) HardCancel() loader.HardCancelMode { return b.loaded.HardCancel }

// Close implements Backend.
func (b *Tracker) Close() error {
	var errs []error
	b.closeMu.Do(func() {
		if b.stopLease != nil {
			close(b.stopLease)
		}
		if b.reader != nil {
			errs = append(errs, b.reader.Close())
		}
		b.closeBacklog()
		for _, l := range b.links {
			errs = append(errs, l.Close())
		}
		if b.catcher != nil {
			errs = append(errs, b.catcher.Close())
		}
		if b.inspector != nil {
			errs = append(errs, b.inspector.close())
		}
		errs = append(errs, b.objs.Close())
		if b.bss != nil {
			errs = append(errs, b.bss.Close())
		}
		if b.pinLock != nil {
			errs = append(errs, b.pinLock.Close())
		}
	})
	return errors.Join(errs...)
}
