package bpf

import (
	"bytes"
	"fmt"
	"time"
	"unsafe"

	"github.com/lineage-dev/lineage/internal/lineage"
)

const eventSize = int(unsafe.Sizeof(lineageEvent{}))

// argsLen is LINEAGE_ARGS_LEN: how much of argv an exec event carries.
const argsLen = len(lineageEvent{}.Args)

// eventHeaderSize is how much of struct event a fork or exit event fills:
// all but the filename and argv, which only exec events carry.
const eventHeaderSize = int(unsafe.Offsetof(lineageEvent{}.Filename))

// decode turns one ring-buffer record into an Event.
func decode(raw []byte) (lineage.Event, error) {
	want := eventHeaderSize
	if len(raw) >= int(unsafe.Offsetof(lineageEvent{}.Kind))+4 && kindOf(raw) == lineageEventKindEVENT_EXEC {
		want = eventSize
	}
	if len(raw) < want {
		return lineage.Event{}, fmt.Errorf("decode event: %d bytes, want %d", len(raw), want)
	}
	// The record is the C struct in the machine's own byte order and
	// layout (bpf2go checks the layout): a plain copy decodes it, without
	// the reflection of encoding/binary, which would cost the reader more
	// CPU per event than the kernel spends producing it.
	var e lineageEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&e)), eventSize), raw[:min(len(raw), eventSize)])
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
		ev.Filename = cString(e.Filename[:])
		n := min(int(e.ArgsSize), len(e.Args))
		ev.Argv = splitArgs(e.Args[:n])
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

// kindOf reads the kind of the record raw, at least a kind's length long.
func kindOf(raw []byte) lineageEventKind {
	var k lineageEventKind
	off := unsafe.Offsetof(lineageEvent{}.Kind)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&k)), unsafe.Sizeof(k)), raw[off:])
	return k
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
func splitArgs[T ~int8 | ~uint8](b []T) []string {
	raw := make([]byte, len(b))
	for i, c := range b {
		raw[i] = byte(c)
	}
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
