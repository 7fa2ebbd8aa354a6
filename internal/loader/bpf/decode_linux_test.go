package bpf

import (
	"encoding/binary"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/lineage-dev/lineage/internal/lineage"
)

func encodeEvent(t *testing.T, e lineageEvent) []byte {
	t.Helper()
	buf := make([]byte, eventSize)
	if _, err := binary.Encode(buf, binary.NativeEndian, &e); err != nil {
		t.Fatal(err)
	}
	return buf
}

func setBytes[T ~int8 | ~uint8](dst []T, s string) {
	for i := range dst {
		dst[i] = 0
	}
	for i := 0; i < len(s) && i < len(dst); i++ {
		dst[i] = T(s[i])
	}
}

func TestDecodeExec(t *testing.T) {
	var e lineageEvent
	e.Kind = lineageEventKindEVENT_EXEC
	e.Pid, e.Start = 42, 1000
	e.ParentPid, e.ParentStart = 41, 999
	e.RootPid, e.RootStart = 40, 998
	e.TimeNs = 5e9
	setBytes(e.Comm[:], "true")
	setBytes(e.Filename[:], "/bin/true")
	args := "/bin/true\x00a\x00\x00b c\x00"
	setBytes(e.Args[:], args)
	e.ArgsSize = uint32(len(args))
	ev, err := decode(encodeEvent(t, e))
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
	// An empty argument in the middle survives; the trailing NUL does not
	// make one.
	if want := []string{"/bin/true", "a", "", "b c"}; !slices.Equal(ev.Argv, want) {
		t.Errorf("argv %q, want %q", ev.Argv, want)
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
	// argv that fills the buffer with no terminating NUL
	e.Kind = lineageEventKindEVENT_EXEC
	setBytes(e.Args[:], string(make([]byte, 0)))
	for i := range e.Args {
		e.Args[i] = 'x'
	}
	e.ArgsSize = 1 << 20 // larger than the buffer: clamped
	ev, err := decode(encodeEvent(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Argv) != 1 || len(ev.Argv[0]) != len(e.Args) {
		t.Errorf("argv %q", ev.Argv)
	}
}

func BenchmarkDecode(b *testing.B) {
	var e lineageEvent
	e.Kind = lineageEventKindEVENT_EXEC
	setBytes(e.Comm[:], "true")
	setBytes(e.Filename[:], "/bin/true")
	args := "/bin/true\x00--version\x00"
	setBytes(e.Args[:], args)
	e.ArgsSize = uint32(len(args))
	raw := make([]byte, eventSize)
	copy(raw, unsafe.Slice((*byte)(unsafe.Pointer(&e)), eventSize))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeShortRecords: fork and exit events end before the filename; an
// exec event that short is an error.
func TestDecodeShortRecords(t *testing.T) {
	var e lineageEvent
	e.Kind = lineageEventKindEVENT_FORK
	e.Pid, e.Start = 42, 1000
	setBytes(e.Comm[:], "sh")
	raw := encodeEvent(t, e)[:eventHeaderSize]
	ev, err := decode(raw)
	if err != nil || ev.Kind != lineage.EventFork || ev.Process.PID != 42 || ev.Comm != "sh" {
		t.Fatalf("short fork: %+v, %v", ev, err)
	}
	e.Kind = lineageEventKindEVENT_EXEC
	if _, err := decode(encodeEvent(t, e)[:eventHeaderSize]); err == nil {
		t.Fatal("a short exec record decoded")
	}
}
