package bpf

import (
	"bytes"
	"encoding/binary"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/lineage-dev/lineage/lineage"
)

func encodeEvent(t testing.TB, e lineageEvent) []byte {
	t.Helper()
	buf := make([]byte, eventSize)
	if _, err := binary.Encode(buf, binary.NativeEndian, &e); err != nil {
		t.Fatal(err)
	}
	return buf
}

// encodeExec is an exec record as the exec hook writes it: the event,
// then the path with its NUL and argv, back to back.
func encodeExec(t testing.TB, e lineageEvent, filename, args string) []byte {
	t.Helper()
	e.Kind = lineageEventKindEVENT_EXEC
	e.FilenameSize, e.ArgsSize = uint32(len(filename)+1), uint32(len(args))
	raw := append(encodeEvent(t, e), filename...)
	return append(append(raw, 0), args...)
}

// encodeFixedExec is an exec record as layouts up to 3 wrote it: the
// event, a 128-byte path slot and a 1,024-byte argv slot.
func encodeFixedExec(t testing.TB, e lineageEvent, filename, args string) []byte {
	t.Helper()
	e.Kind = lineageEventKindEVENT_EXEC
	e.FilenameSize, e.ArgsSize = 0, uint32(len(args))
	raw := make([]byte, fixedExecSize)
	copy(raw, encodeEvent(t, e))
	copy(raw[eventSize:], filename)
	copy(raw[eventSize+filenameLen:], args)
	return raw
}

func setBytes[T ~int8 | ~uint8](dst []T, s string) {
	for i := range dst {
		dst[i] = 0
	}
	for i := 0; i < len(s) && i < len(dst); i++ {
		dst[i] = T(s[i])
	}
}

// TestDecodeExec reads exec records in both shapes: sized to what they
// carry, and the fixed slots a set pinned by an older binary may hold.
func TestDecodeExec(t *testing.T) {
	var e lineageEvent
	e.Pid, e.Start = 42, 1000
	e.ParentPid, e.ParentStart = 41, 999
	e.RootPid, e.RootStart = 40, 998
	e.TimeNs = 5e9
	setBytes(e.Comm[:], "true")
	args := "/bin/true\x00a\x00\x00b c\x00"
	for name, raw := range map[string][]byte{
		"sized": encodeExec(t, e, "/bin/true", args),
		"fixed": encodeFixedExec(t, e, "/bin/true", args),
	} {
		t.Run(name, func(t *testing.T) {
			ev, err := decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != lineage.EventExec || ev.Process != (lineage.Identity{PID: 42, StartTicks: 1000}) ||
				ev.Parent != (lineage.Identity{PID: 41, StartTicks: 999}) || ev.Root != (lineage.Identity{PID: 40, StartTicks: 998}) {
				t.Errorf("decoded %+v", ev)
			}
			if ev.Comm != "true" || ev.Filename != "/bin/true" || ev.Time.Seconds() != 5 {
				t.Errorf("decoded %+v", ev)
			}
			// An empty argument in the middle survives; the trailing NUL
			// does not make one.
			if want := []string{"/bin/true", "a", "", "b c"}; !slices.Equal(ev.Argv, want) {
				t.Errorf("argv %q, want %q", ev.Argv, want)
			}
		})
	}
	if got := len(encodeExec(t, e, "/bin/true", args)); got != eventSize+10+len(args) {
		t.Errorf("a sized exec record of a 9-byte path and %d bytes of argv is %d bytes", len(args), got)
	}
}

func TestDecodeExitAndFlags(t *testing.T) {
	var e lineageEvent
	e.Kind = lineageEventKindEVENT_EXIT
	e.Pid, e.Start = 7, 70
	e.ExitStatus = int32(syscall.SIGKILL)
	ev, err := decode(encodeEvent(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if sig, ok := ev.Status.Signaled(); !ok || sig != syscall.SIGKILL {
		t.Errorf("status %v", ev.Status)
	}

	e.Kind = lineageEventKindEVENT_FORK
	e.Flags = lineageEventFlagEVENT_F_ROOT | lineageEventFlagEVENT_F_CONTAINED | lineageEventFlagEVENT_F_UNTRACKED
	ev, err = decode(encodeEvent(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.IsRoot || !ev.Contained || !ev.Untracked || ev.ArgvTruncated {
		t.Errorf("flags decoded as %+v", ev)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	if _, err := decode([]byte{1, 2, 3}); err == nil {
		t.Error("a short record decoded")
	}
	var e lineageEvent
	e.Kind = 99
	if _, err := decode(encodeEvent(t, e)); err == nil {
		t.Error("an unknown kind decoded")
	}
	// Sizes that say more than the record holds, or more than the kernel
	// ever writes.
	raw := encodeExec(t, e, "/bin/sh", "sh\x00-c\x00")
	for name, cut := range map[string][]byte{
		"cut short":   raw[:len(raw)-1],
		"header only": raw[:eventSize],
	} {
		if _, err := decode(cut); err == nil {
			t.Errorf("%s: an exec record decoded", name)
		}
	}
	huge := slices.Clone(raw)
	binary.NativeEndian.PutUint32(huge[unsafe.Offsetof(e.FilenameSize):], filenameLen+1)
	if _, err := decode(append(huge, make([]byte, 2000)...)); err == nil {
		t.Error("an exec record with a path over the kernel's bound decoded")
	}
	// A fixed-slot argv that fills its slot with no terminating NUL, its
	// size larger than the slot: clamped.
	args := string(bytes.Repeat([]byte{'x'}, argsLen))
	fixed := encodeFixedExec(t, e, "/bin/x", args)
	binary.NativeEndian.PutUint32(fixed[unsafe.Offsetof(e.ArgsSize):], 1<<20)
	ev, err := decode(fixed)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Argv) != 1 || len(ev.Argv[0]) != argsLen {
		t.Errorf("argv %q", ev.Argv)
	}
}

func BenchmarkDecode(b *testing.B) {
	var e lineageEvent
	setBytes(e.Comm[:], "true")
	raw := encodeExec(b, e, "/bin/true", "/bin/true\x00--version\x00")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeShortRecords: fork and exit records are the event alone.
func TestDecodeShortRecords(t *testing.T) {
	var e lineageEvent
	e.Kind = lineageEventKindEVENT_FORK
	e.Pid, e.Start = 42, 1000
	setBytes(e.Comm[:], "sh")
	raw := encodeEvent(t, e)
	ev, err := decode(raw)
	if err != nil || ev.Kind != lineage.EventFork || ev.Process.PID != 42 || ev.Comm != "sh" {
		t.Fatalf("fork: %+v, %v", ev, err)
	}
	if _, err := decode(raw[:eventSize-1]); err == nil {
		t.Fatal("a record shorter than the event decoded")
	}
}
