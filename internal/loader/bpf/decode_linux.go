package bpf

import (
	"bytes"
	"fmt"
	"time"
	"unsafe"

	"github.com/lineage-dev/lineage/lineage"
)

// eventSize is the size of struct event: a whole fork or exit record, and
// the part of an exec record before its path and argv.
const eventSize = int(unsafe.Sizeof(lineageEvent{}))

// filenameLen and argsLen are LINEAGE_FILENAME_LEN and LINEAGE_ARGS_LEN:
// how much of the executed path (its NUL included) and of argv an exec
// event carries at most.
const (
	filenameLen = 128
	argsLen     = len(lineageExecEvent{}.Strings) - filenameLen
)

// fixedExecSize is the size of an exec record as layouts up to 3 wrote it
// (fixedExecLayout): the event, a 128-byte filename slot and a 1,024-byte
// argv slot, with filename_size 0.
const fixedExecSize = eventSize + filenameLen + argsLen

// decode turns one ring-buffer record into an Event. It reads exec records
// in both shapes: sized to what they carry (filename_size set), and the
// fixed slots that a set pinned by an older binary may still hold.
func decode(raw []byte) (lineage.Event, error) {
	if len(raw) < eventSize {
		return lineage.Event{}, fmt.Errorf("decode event: %d bytes, want at least %d", len(raw), eventSize)
	}
	// The record is the C struct in the machine's own byte order and
	// layout (bpf2go checks the layout): a plain copy decodes it, without
	// the reflection of encoding/binary, which would cost the reader more
	// CPU per event than the kernel spends producing it.
	var e lineageEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&e)), eventSize), raw)
	ev := lineage.Event{
		Time:          time.Duration(e.TimeNs),
		Process:       lineage.Identity{PID: e.Pid, StartTicks: e.Start},
		Parent:        lineage.Identity{PID: e.ParentPid, StartTicks: e.ParentStart},
		Root:          lineage.Identity{PID: e.RootPid, StartTicks: e.RootStart},
		Comm:          cString(e.Comm[:]),
		IsRoot:        e.Flags&lineageEventFlagEVENT_F_ROOT != 0,
		Armed:         e.Flags&lineageEventFlagEVENT_F_ARMED != 0,
		Untracked:     e.Flags&lineageEventFlagEVENT_F_UNTRACKED != 0,
		Contained:     e.Flags&lineageEventFlagEVENT_F_CONTAINED != 0,
		ArgvTruncated: e.Flags&lineageEventFlagEVENT_F_ARGS_TRUNCATED != 0,
		Spared:        e.Flags&lineageEventFlagEVENT_F_SPARED != 0,
		Caught:        e.Flags&lineageEventFlagEVENT_F_CAUGHT != 0,
	}
	switch e.Kind {
	case lineageEventKindEVENT_FORK:
		ev.Kind = lineage.EventFork
	case lineageEventKindEVENT_EXEC:
		ev.Kind = lineage.EventExec
		filename, args, err := execStrings(&e, raw[eventSize:])
		if err != nil {
			return lineage.Event{}, err
		}
		ev.Filename = cString(filename)
		ev.Argv = splitArgs(args)
		if e.Flags&lineageEventFlagEVENT_F_CREDS != 0 {
			ev.UID, ev.EUID, ev.CredsKnown = e.Uid, e.Euid, true
		}
	case lineageEventKindEVENT_EXIT:
		ev.Kind = lineage.EventExit
		ev.Status = lineage.ExitStatus(e.ExitStatus)
	default:
		return lineage.Event{}, fmt.Errorf("decode event: unknown kind %d", e.Kind)
	}
	return ev, nil
}

// execStrings splits what follows an exec event's header, tail, into its
// path and argv: filename_size bytes and args_size bytes back to back, or,
// with filename_size 0, the fixed slots of layouts up to 3.
func execStrings(e *lineageEvent, tail []byte) (filename, args []byte, err error) {
	if e.FilenameSize == 0 {
		if len(tail) < filenameLen+argsLen {
			return nil, nil, fmt.Errorf("decode event: exec record of %d bytes, want %d", eventSize+len(tail), fixedExecSize)
		}
		return tail[:filenameLen], tail[filenameLen:][:min(int(e.ArgsSize), argsLen)], nil
	}
	fn, n := int(e.FilenameSize), int(e.ArgsSize)
	if fn > filenameLen || n > argsLen || len(tail) < fn+n {
		return nil, nil, fmt.Errorf("decode event: exec record of %d bytes with a %d-byte path and %d bytes of argv",
			eventSize+len(tail), fn, n)
	}
	return tail[:fn], tail[fn : fn+n], nil
}

func cString[T ~int8 | ~uint8](b []T) string {
	buf := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		buf = append(buf, byte(c))
	}
	return string(buf)
}

// splitArgs splits a NUL-separated argv; a cut-off last argument is kept.
func splitArgs(raw []byte) []string {
	raw = bytes.TrimRight(raw, "\x00")
	if len(raw) == 0 {
		return nil
	}
	parts := bytes.Split(raw, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}
