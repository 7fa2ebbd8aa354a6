package reap

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// DefaultPoll is how often the Source is listed again while the reaper waits,
// when [Options.Poll] is zero.
const DefaultPoll = 20 * time.Millisecond

// DefaultTimeout bounds a whole reap when [Options.Timeout] is zero.
const DefaultTimeout = 5 * time.Minute

var (
	// ErrSurvivors is wrapped by the error [Reap] returns when members it
	// meant to end are still alive; [Report.Survivors] names them.
	ErrSurvivors = errors.New("members survived the reap")
	// ErrNotProcess is wrapped by [Signaler.Open] when the pid names a
	// thread rather than a process (thread-group leader).
	ErrNotProcess = errors.New("not a process")
	// ErrTimeout is wrapped by the error [Reap] returns when
	// [Options.Timeout] passed before the lineage was empty.
	ErrTimeout = errors.New("reap timed out")
)

// Source tells the reaper which processes make up the lineage.
type Source interface {
	// Members returns the live members now, exactly: every process of the
	// lineage alive at the call, the root included while it lives. It may
	// list zombies. The reaper calls it from one goroutine, many times.
	Members() ([]lineage.Member, error)
}

// SourceFunc adapts a function to [Source].
type SourceFunc func() ([]lineage.Member, error)

// Members calls f.
func (f SourceFunc) Members() ([]lineage.Member, error) { return f() }

// Options tune a reap. The zero value lingers not at all, gives members
// [DefaultGrace] after SIGTERM, and contains the lineage by stopping it.
type Options struct {
	// Linger is how long to wait for members to exit on their own before
	// anything is signalled. Members gone by then are reported as exited.
	Linger time.Duration
	// Grace is how long members have to exit after SIGTERM before they are
	// killed; zero means DefaultGrace.
	Grace time.Duration
	// Poll is how often the Source is listed again while the reaper waits
	// (exits wake it at once); zero means DefaultPoll.
	Poll time.Duration
	// Timeout bounds the whole reap, linger included; zero means
	// DefaultTimeout. Past it the reap stops: it sends SIGKILL to the
	// members it knows of, waits for none of them, reports those not seen
	// gone as lineage.Survived with why (a member in uninterruptible sleep, say, or
	// a kept member whose children keep coming), and Reap returns an error
	// wrapping ErrTimeout.
	Timeout time.Duration

	// Contain, if set, is called once after the linger and before the first
	// signal, when the Source still lists members. It keeps the lineage from
	// growing (for instance by killing new children at birth in the kernel)
	// and returns the containment's name ("kernel", "kernel-forker"), which
	// the report carries. When Contain is nil, returns lineage.ContainStop or fails,
	// the reaper contains the lineage itself by stopping it.
	Contain func() (lineage.Containment, error)
	// Keep, if set, is asked once about each member, after its identity
	// has been checked and with its Argv filled from /proc when the Source
	// had none. A member it keeps is never signalled and is reported as
	// kept with the reason. Keep can only spare: nothing it says adds a
	// victim. It does not spare a kept member's children, which are asked
	// about separately (so a kept member that forks without end keeps the
	// reap going until ctx ends).
	Keep func(lineage.Member) (keep bool, reason string)
	// Refuse, if set, is asked at every signal, after the reaper's own
	// checks, with the member and its /proc/PID/stat as read just then;
	// refusing means the member is never signalled again. It is for a
	// second, independent protected set (the policy's).
	Refuse func(lineage.Member, lineage.Stat) (reason string, refuse bool)
	// Protect names more processes that are never signalled, besides the
	// built-in protected set.
	Protect []lineage.Identity

	// Inspect, if set, reads in one call what /proc/PID/stat shows of each
	// of pids at the moment of the call, into out (as long as pids): a pid
	// that no process has gets a zero Stat. It may leave PGRP and Session
	// zero; the reaper reads neither. It must name pids as ProcRoot does.
	// The reaper uses it instead of a read of /proc per member wherever it
	// checks several at once; when it fails, the reaper reads /proc.
	Inspect func(pids []uint32, out []lineage.Stat) error

	// ReapChild, if set, is called with the pid of each member seen to
	// exit, at once: where the member is the caller's child (a subreaper's
	// orphan) it reaps it and returns its exit status, so that a reap of
	// many leaves no zombie to wait for after the last death. It returns
	// false for any other pid.
	ReapChild func(pid int) (lineage.ExitStatus, bool)

	// ProcRoot is where /proc is mounted; "" means "/proc". It must show
	// the reaper itself and its ancestors, which are protected.
	ProcRoot string
	// Signaler reaches processes; nil means pidfds. Tests of the reaper's
	// logic inject their own. Reap uses it for one call and doesn't close it.
	Signaler Signaler
	// Now is the clock, as time since boot; nil means CLOCK_BOOTTIME as read
	// once when the reap starts, advanced by Go's monotonic clock (read
	// without a system call; the two differ only by time suspended). Ages
	// are computed on it, so an injected clock yields arbitrary ages.
	Now func() time.Duration
}

// Pin is a [Signaler]'s handle on one process.
type Pin int

// Signaler pins processes, signals them and waits for them to exit. The
// reaper uses one from a single goroutine. The default uses pidfds.
type Signaler interface {
	// Open pins the process id names and watches it for exit: from here on
	// the pin names that process and no other, even once its pid is
	// reused. It may pin whatever process has id's pid now (a pidfd does):
	// the reaper checks the start time after Open. It wraps
	// lineage.ErrNoProcess when no process has that pid and ErrNotProcess
	// when the pid is a thread's; a Signaler whose sends check the start
	// time themselves may leave both to the check.
	Open(id lineage.Identity) (Pin, error)
	// Send sends sig to the pinned process; sig 0 only checks that it
	// exists. It wraps lineage.ErrNoProcess when the process is gone (a
	// zombie still accepts signals and ignores them).
	Send(p Pin, sig syscall.Signal) error
	// Wait returns the watched pins whose process has exited (zombies
	// included), waiting up to timeout for one; 0 doesn't wait. Each pin
	// is returned once and then no longer watched.
	Wait(timeout time.Duration) ([]Pin, error)
	// Status returns how the pinned process ended, when the kernel tells.
	Status(p Pin) (lineage.ExitStatus, bool)
	// Release frees p; it is not watched any more.
	Release(p Pin)
}

// BatchSignaler is a [Signaler] that sends signals to many pins in one
// call: the reaper sends through it wherever it signals more than one
// member at once.
type BatchSignaler interface {
	Signaler
	// SendAll sends sigs[i] to pins[i] and sets errs[i] as Send would
	// return it. The slices are as long as pins.
	SendAll(pins []Pin, sigs []syscall.Signal, errs []error)
}

// Reap ends the lineage that src lists:
//
//  1. linger: wait up to Options.Linger for members to exit on their own;
//  2. contain: Options.Contain, or stop the whole set with SIGSTOP, listing
//     again and stopping newcomers until two passes in a row find none;
//  3. terminate: SIGTERM every member not kept (and SIGCONT right after to a
//     stopped one, so it can act on the TERM), then wait up to Grace for
//     them, signalling newcomers as they appear;
//  4. kill: SIGKILL what is left (stopped members too), list again and
//     repeat until the Source lists no live member (with the stop
//     containment: stop the set again before each kill, and require two
//     empty passes), waiting for each death;
//  5. report every member's outcome.
//
// Reap returns when the lineage is empty, or when ctx is done, Timeout has
// passed or the Source fails; then it kills the members it already knows of
// without waiting for them, resumes those it stopped and could not kill,
// and returns the report so far with an error. The error wraps
// ErrSurvivors when members it meant to end are still alive. Reap may be
// called from several goroutines at once; each call uses its own Options.
//
// Each member holds a pidfd from its first signal to the end of the reap.
// When the process runs out of file descriptors, the reaper frees those of
// members already gone and lets the others wait for a later pass; the stop
// containment can't stop members it can't pin.
func Reap(ctx context.Context, src Source, opts Options) (Report, error) {
	if src == nil {
		return Report{}, fmt.Errorf("%w reap options: no source", lineage.ErrInvalid)
	}
	switch {
	case opts.Linger < 0:
		return Report{}, fmt.Errorf("%w reap options: negative linger %v", lineage.ErrInvalid, opts.Linger)
	case opts.Grace < 0:
		return Report{}, fmt.Errorf("%w reap options: negative grace %v", lineage.ErrInvalid, opts.Grace)
	case opts.Poll < 0:
		return Report{}, fmt.Errorf("%w reap options: negative poll interval %v", lineage.ErrInvalid, opts.Poll)
	case opts.Timeout < 0:
		return Report{}, fmt.Errorf("%w reap options: negative timeout %v", lineage.ErrInvalid, opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Poll == 0 {
		opts.Poll = DefaultPoll
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Now == nil {
		boot, mono := proc.BootTime(), time.Now()
		opts.Now = func() time.Duration { return boot + time.Since(mono) }
	}
	procFS, err := proc.Open(opts.ProcRoot)
	if err != nil {
		return Report{}, fmt.Errorf("reap: %w", err)
	}
	g, err := newGuard(procFS, opts.Protect)
	if err != nil {
		return Report{}, fmt.Errorf("reap: %w", err)
	}
	if opts.Signaler == nil {
		p, err := newPidfds()
		if err != nil {
			return Report{}, fmt.Errorf("reap: %w", err)
		}
		defer p.Close()
		opts.Signaler = p
	}
	stats := procFS.StatReader()
	defer stats.Close()
	r := &reaper{
		src:       src,
		opts:      opts,
		proc:      procFS,
		stats:     stats,
		guard:     g,
		sig:       opts.Signaler,
		byID:      make(map[lineage.Identity]*victim),
		byPin:     make(map[Pin]*victim),
		inspected: make(map[uint32]lineage.Stat),
	}
	return r.run(ctx)
}
