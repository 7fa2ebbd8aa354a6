package tracker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lineage-dev/lineage/internal/guardian"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/loader/poll"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/supervise"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// TrackerOptions choose and tune a tracker's backend, and say where its
// jobs' notes go.
type TrackerOptions struct {
	// Backend is "auto", "bpf" or "proc", as [loader.ParseBackend] reads it.
	Backend string
	// MaxMembers sizes the bpf backend's membership map; zero means
	// [loader.DefaultMaxMembers].
	MaxMembers uint32
	// OnFull says what the bpf backend does with a process its full map
	// can't track; "" is [loader.OnFullKill].
	OnFull loader.OnFull
	// RingBytes sizes the bpf backend's event ring buffer; zero means its
	// default (see [bpf.Options]).
	RingBytes uint32
	// PinRoot, when set, pins the bpf backend's tracker there (see
	// [bpf.Options]): it outlives the process, and the next tracker
	// with the same PinRoot takes it over. Only `lineage serve` pins.
	PinRoot string
	// Interval is the proc backend's time between scans; zero adapts.
	Interval time.Duration
	// Log receives notes for people ("lineage: ..." lines); nil discards
	// them. Verbose adds the ones that only -v asks for.
	Log     io.Writer
	Verbose bool
	// SayBackend makes the backend in use, and why, the first note (a
	// daemon's first line), whatever Verbose says; the proc backend,
	// asked for or fallen back to, is a warning that says what it misses.
	SayBackend bool
	// OnEvent, if set, is given every event after the tree has it, from
	// the tracker's one event goroutine; it must not block.
	OnEvent func(lineage.Event)
}

// Tracker is one backend with the event tree it feeds, the /proc reader
// and the protected set of the process that holds it: what the jobs it
// starts share. The holder keeps it reachable, and open, for as long as any
// of its jobs must be tracked.
type Tracker struct {
	backend  loader.Backend
	choice   loader.Choice
	tree     *lineage.Tree
	proc     proc.FS
	caller   policy.Caller
	children *supervise.Children
	log      io.Writer
	verbose  bool
	onEvent  func(lineage.Event)

	// guardian, once set, is sent every new member (one guarded job per
	// tracker: lineage run's).
	guardian atomic.Pointer[guardian.Guardian]
	// jobs maps a root to its *Job, for the marks the kernel must spare.
	jobs sync.Map

	// recorder, once set, writes the recorded job's events (record.go).
	recorder atomic.Pointer[recorder]

	stopEvents context.CancelFunc
	eventsDone chan error
	drain      sync.Once
}

// OpenTracker makes the calling process a child subreaper that reaps its
// children, opens the backend and starts recording its events. A process
// holds at most one tracker at a time, since it waits for all the
// process's children. Close it when its jobs are done.
func OpenTracker(opts TrackerOptions) (*Tracker, error) {
	t, err := newTrackerBase(opts)
	if err != nil {
		return nil, err
	}
	// Orphans of the jobs come back to the tracker rather than to init,
	// and it reaps them: with the proc backend this is what keeps a
	// double-forked daemon findable.
	if err := supervise.BecomeSubreaper(); err != nil {
		return nil, err
	}
	t.children = supervise.WatchChildren()
	t.backend, t.choice, err = openBackend(opts.Backend, backendOptions{
		BPF: &bpf.Options{
			MaxMembers: opts.MaxMembers, OnFull: opts.OnFull, RingBytes: opts.RingBytes, PinRoot: opts.PinRoot,
		},
		Proc: &poll.Options{Interval: opts.Interval, Reaper: t.children},
	})
	if err != nil {
		t.children.Close()
		return nil, err
	}
	if err := t.checkTimeNamespace("/proc"); err != nil {
		_ = t.backend.Close()
		t.children.Close()
		return nil, err
	}
	switch {
	case !opts.SayBackend:
		t.detail("lineage: backend %s\n", t.choice)
	case t.choice.Backend == loader.BackendProc:
		// Asked for or fallen back to, the limit is the same.
		t.note("lineage: warning: backend %s: processes that live and die between two scans of /proc are not seen\n", t.choice)
	default:
		t.note("lineage: backend %s\n", t.choice)
	}
	t.notePinned()
	t.startEvents()
	return t, nil
}

// newTrackerBase is what every tracker has: the tree, the /proc reader,
// the protected set and the notes.
func newTrackerBase(opts TrackerOptions) (*Tracker, error) {
	t := &Tracker{log: opts.Log, verbose: opts.Verbose, tree: lineage.NewTree(), onEvent: opts.OnEvent}
	// Until a reap, exited members are dropped once they matter to nobody.
	t.tree.SetPruning(true)
	if t.log == nil {
		t.log = io.Discard
	}
	var err error
	if t.proc, err = proc.Open("/proc"); err != nil {
		return nil, err
	}
	if t.caller, err = callerFacts(t.proc); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Tracker) startEvents() {
	ctx, stop := context.WithCancel(context.Background())
	t.stopEvents = stop
	t.eventsDone = make(chan error, 1)
	go func() { t.eventsDone <- t.backend.Run(ctx, t.apply) }()
}

// Drain stops recording events once the pending ones are in the tree, so
// that reports see every exit. Later calls do nothing.
func (t *Tracker) Drain() {
	t.drain.Do(func() {
		t.stopEvents()
		if err := <-t.eventsDone; err != nil {
			t.note("lineage: events: %v\n", err)
		}
	})
}

// Close drains the events and closes the backend: nothing is tracked once
// it returns, unless the tracker is pinned (TrackerOptions.PinRoot), which
// the kernel runs on. Jobs registered to die with their supervisor live on.
func (t *Tracker) Close() error {
	t.Drain()
	err := t.backend.Close()
	t.children.Close()
	return err
}

// note prints a note for people.
func (t *Tracker) note(format string, args ...any) { fmt.Fprintf(t.log, format, args...) }

// detail prints a note that only -v asks for.
func (t *Tracker) detail(format string, args ...any) {
	if t.verbose {
		t.note(format, args...)
	}
}
