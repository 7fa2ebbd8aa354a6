package lineage

import (
	"fmt"
	"syscall"
	"time"
)

// EventKind says what happened to a process.
type EventKind uint8

const (
	// EventFork: a member created a process, which became a member. For a
	// root, Parent is the supervisor that spawned it.
	EventFork EventKind = iota + 1
	// EventExec: a member ran a new program.
	EventExec
	// EventExit: a member's whole thread group is dead.
	EventExit
)

func (k EventKind) String() string {
	switch k {
	case EventFork:
		return "fork"
	case EventExec:
		return "exec"
	case EventExit:
		return "exit"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change to a lineage, as a backend reports it.
type Event struct {
	Kind EventKind
	// Time is when it happened, as time since boot (CLOCK_BOOTTIME).
	Time time.Duration
	// Process is the member the event is about.
	Process Identity
	// Parent is the member's lineage parent: the thread group that created
	// it, whatever its current ppid.
	Parent Identity
	// Root is the root whose lineage the member belongs to.
	Root Identity
	// Comm is the kernel's short command name; an exit's is that of the
	// process's last thread to end, which may be a thread's own name.
	Comm string
	// Filename is the path that was executed (EventExec).
	Filename string
	// Argv is the new program's arguments (EventExec); ArgvTruncated is set
	// when the backend had to cut it.
	Argv          []string
	ArgvTruncated bool
	// Status is how the process ended (EventExit).
	Status ExitStatus
	// IsRoot is set on the EventFork that created a root; Armed too when
	// an armed process forked it (its arm's cookie is in the backend's
	// roots).
	IsRoot bool
	Armed  bool
	// Untracked is set when the backend could not add the new process to the
	// membership (the map was full). With Contained too it was killed (fail
	// closed); alone, it escaped, and says so.
	Untracked bool
	// Contained is set when the new process was killed at birth because its
	// lineage was being reaped, or, with Untracked, because it could not be
	// tracked.
	Contained bool
	// UID and EUID are the real and effective user ids the process runs
	// with after the exec (EventExec), when CredsKnown says the backend saw
	// them.
	UID, EUID  uint32
	CredsKnown bool
	// Spared is set when the kernel spared the process for a keep rule in
	// the same hook run: at its exec of a program an exe rule keeps
	// (EventExec), or born spared from a kept root or a member spared for
	// its program (EventFork).
	Spared bool
	// Caught is set on an EventFork the second fork hook inserted: the
	// kernel skipped the first (or, where another tool registered the
	// tracepoint's perf probe first, the second ran before it; the
	// backend's counters tell the two apart).
	Caught bool
}

// ExitStatus is a wait(2) status word: (code << 8) | signal.
type ExitStatus int32

// StatusUnknown is the status of an exit that no one could see: the proc
// backend knows that a process is gone, but its status only when it reaped
// the process itself or saw it as a zombie.
const StatusUnknown ExitStatus = -1

// Known reports whether s is a real status rather than [StatusUnknown].
func (s ExitStatus) Known() bool { return s != StatusUnknown }

// Exited reports whether the process ended by exit(2), and its code.
func (s ExitStatus) Exited() (code int, ok bool) {
	ws := syscall.WaitStatus(s)
	return ws.ExitStatus(), ws.Exited()
}

// Signaled reports whether a signal ended the process, and which.
func (s ExitStatus) Signaled() (syscall.Signal, bool) {
	ws := syscall.WaitStatus(s)
	return ws.Signal(), ws.Signaled()
}

// String reads like "exit 0" or "signal KILL".
func (s ExitStatus) String() string {
	if !s.Known() {
		return "unknown"
	}
	if code, ok := s.Exited(); ok {
		return fmt.Sprintf("exit %d", code)
	}
	if sig, ok := s.Signaled(); ok {
		return "signal " + SignalName(sig)
	}
	return fmt.Sprintf("status %#x", int32(s))
}

// SignalName returns the short name of sig ("TERM", "KILL"), or its number.
func SignalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGQUIT:
		return "QUIT"
	case syscall.SIGABRT:
		return "ABRT"
	case syscall.SIGKILL:
		return "KILL"
	case syscall.SIGSEGV:
		return "SEGV"
	case syscall.SIGPIPE:
		return "PIPE"
	case syscall.SIGALRM:
		return "ALRM"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGSTOP:
		return "STOP"
	case syscall.SIGCONT:
		return "CONT"
	case syscall.SIGUSR1:
		return "USR1"
	case syscall.SIGUSR2:
		return "USR2"
	}
	return fmt.Sprintf("%d", int(sig))
}
