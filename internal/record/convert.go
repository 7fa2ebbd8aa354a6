package record

import (
	"strconv"
	"syscall"

	"github.com/lineage-dev/lineage/lineage"
)

func itoa(n int) string { return strconv.Itoa(n) }

// exitOf turns a wait status into an [Exit]; nil when the status is unknown.
func exitOf(s lineage.ExitStatus) *Exit {
	if !s.Known() {
		return nil
	}
	if code, ok := s.Exited(); ok {
		return &Exit{Code: &code}
	}
	if sig, ok := s.Signaled(); ok {
		return &Exit{Signal: lineage.SignalName(sig), Core: syscall.WaitStatus(s).CoreDump()}
	}
	return nil
}

// kindOf maps the tracker's event kinds to the record's.
func kindOf(k lineage.EventKind) (Kind, bool) {
	switch k {
	case lineage.EventFork:
		return KindFork, true
	case lineage.EventExec:
		return KindExec, true
	case lineage.EventExit:
		return KindExit, true
	}
	return "", false
}

// fromLineage is the record's view of a tracker event, without its wall time.
func fromLineage(ev lineage.Event) (Event, bool) {
	kind, ok := kindOf(ev.Kind)
	if !ok {
		return Event{}, false
	}
	out := Event{
		Kind:      kind,
		Boot:      ev.Time,
		Process:   ev.Process,
		Parent:    ev.Parent,
		Root:      ev.Root,
		Comm:      ev.Comm,
		IsRoot:    ev.IsRoot,
		Untracked: ev.Untracked,
		Contained: ev.Contained,
	}
	switch kind {
	case KindExec:
		out.Exe = ev.Filename
		out.Argv = ev.Argv
		out.ArgvTruncated = ev.ArgvTruncated
		out.UID, out.EUID = execIDs(ev)
	case KindExit:
		out.Exit = exitOf(ev.Status)
	}
	return out, true
}

// fromMember is an event of kind about m, without times.
func fromMember(kind Kind, m lineage.Member) Event {
	return Event{Kind: kind, Process: m.Identity, Parent: m.Parent, Root: m.Root, Comm: m.Comm}
}

// execIDs are the real and effective uid at exec, when the tracker saw them.
//
// execIDs are the exec's real and effective user ids, when the tracker saw
// them (the BPF exec hook does; the proc backend does not).
func execIDs(ev lineage.Event) (uid, euid *uint32) {
	if !ev.CredsKnown {
		return nil, nil
	}
	u, e := ev.UID, ev.EUID
	return &u, &e
}
