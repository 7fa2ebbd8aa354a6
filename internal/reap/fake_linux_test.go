//go:build linux

package reap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// fakeProc is a /proc tree written by the test. It holds copies of the test
// process's own stat and its ancestors' (the reaper protects them, so it
// must find them), and whatever processes the test adds.
type fakeProc struct {
	t        *testing.T
	root     string
	template []string     // the fields after "(comm) " of a real stat line
	stopped  map[int]bool // processes added in state T
}

func newFakeProc(t *testing.T) *fakeProc {
	f := &fakeProc{t: t, root: t.TempDir(), stopped: make(map[int]bool)}
	for pid := os.Getpid(); pid > 1; {
		st, ok := readStat(pid)
		if !ok {
			t.Fatalf("read own ancestry at pid %d", pid)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f.write(pid, b, []byte("ancestor\x00"))
		if f.template == nil {
			f.template = strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		}
		pid = st.ppid
	}
	return f
}

func (f *fakeProc) write(pid int, stat, cmdline []byte) {
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), stat, 0o644); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), cmdline, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// fakeProcess is one process of a fake tree.
type fakeProcess struct {
	pid    int
	ppid   int // 1 unless set
	start  uint64
	state  string // "S" unless set
	pgrp   int    // its own pid unless set
	kernel bool
	// ignoresTerm: the stat shows SIGTERM ignored.
	ignoresTerm bool
	argv        []string
}

func (f *fakeProc) add(p fakeProcess) lineage.Identity {
	fields := slices.Clone(f.template)
	state, pgrp, flags := p.state, p.pgrp, uint64(0)
	if state == "" {
		state = "S"
	}
	if pgrp == 0 {
		pgrp = p.pid
	}
	if p.kernel {
		flags = 0x00200000 // PF_KTHREAD
	}
	// Fields 3, 4, 5, 6, 9 and 22 of proc(5), counted from field 3.
	ppid := p.ppid
	if ppid == 0 {
		ppid = 1
	}
	fields[0], fields[1], fields[2], fields[3] = state, strconv.Itoa(ppid), strconv.Itoa(pgrp), strconv.Itoa(pgrp)
	fields[6] = strconv.FormatUint(flags, 10)
	if p.ignoresTerm {
		fields[30] = strconv.Itoa(1 << (syscall.SIGTERM - 1)) // field 33, sigignore
	}
	fields[19] = strconv.FormatUint(p.start, 10)
	line := fmt.Sprintf("%d (fake) %s\n", p.pid, strings.Join(fields, " "))
	var cmdline []byte
	for _, a := range p.argv {
		cmdline = append(append(cmdline, a...), 0)
	}
	f.write(p.pid, []byte(line), cmdline)
	f.stopped[p.pid] = state == "T"
	return lineage.Identity{PID: uint32(p.pid), StartTicks: p.start}
}

func (f *fakeProc) remove(pid int) {
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

// fakeSignaler pins the fake tree's processes and plays their part: STOP
// stops, CONT resumes, KILL ends, and any other signal is delivered at once,
// or at the CONT if the process is stopped; then react says whether the
// process exits. Time passes only in Wait.
type fakeSignaler struct {
	proc    *fakeProc
	now     time.Duration
	next    Pin
	pins    map[Pin]int
	gone    map[int]bool
	ready   []Pin
	pending map[int][]syscall.Signal
	sent    map[int][]string
	react   func(pid int, sig syscall.Signal) (exits bool)
	onWait  func()
	// maxPins, if set, is how many pins may be open at once (EMFILE).
	maxPins int
	// stuck holds the processes SIGKILL doesn't end (uninterruptible
	// sleep, which can't be made on demand).
	stuck map[int]bool
	// tick, if set, is how far the clock moves at every look at it, so
	// that the reaper's own work takes time.
	tick time.Duration
}

func newFakeSignaler(f *fakeProc) *fakeSignaler {
	return &fakeSignaler{proc: f, now: 1000 * time.Second, pins: make(map[Pin]int), gone: make(map[int]bool), pending: make(map[int][]syscall.Signal), sent: make(map[int][]string)}
}

func (s *fakeSignaler) clock() time.Duration {
	s.now += s.tick
	return s.now
}

func (s *fakeSignaler) exists(pid int) bool {
	_, err := os.Stat(filepath.Join(s.proc.root, strconv.Itoa(pid)))
	return err == nil && !s.gone[pid]
}

func (s *fakeSignaler) Open(id lineage.Identity) (Pin, error) {
	pid := int(id.PID)
	if !s.exists(pid) {
		return 0, fmt.Errorf("fake open %d: %w", pid, lineage.ErrNoProcess)
	}
	if s.maxPins > 0 && len(s.pins) >= s.maxPins {
		return 0, fmt.Errorf("fake open %d: %w", pid, syscall.EMFILE)
	}
	s.next++
	s.pins[s.next] = pid
	return s.next, nil
}

func (s *fakeSignaler) Send(p Pin, sig syscall.Signal) error {
	pid := s.pins[p]
	if !s.exists(pid) {
		return fmt.Errorf("fake send: %w", lineage.ErrNoProcess)
	}
	if sig == 0 {
		return nil
	}
	s.sent[pid] = append(s.sent[pid], lineage.SignalName(sig))
	switch {
	case sig == syscall.SIGSTOP:
		s.proc.stopped[pid] = true
	case sig == syscall.SIGKILL:
		if !s.stuck[pid] {
			s.exit(pid)
		}
	case sig == syscall.SIGCONT:
		s.proc.stopped[pid] = false
		pending := s.pending[pid]
		delete(s.pending, pid)
		for _, sig := range pending {
			s.deliver(pid, sig)
		}
	case s.proc.stopped[pid]:
		s.pending[pid] = append(s.pending[pid], sig)
	default:
		s.deliver(pid, sig)
	}
	return nil
}

func (s *fakeSignaler) deliver(pid int, sig syscall.Signal) {
	if !s.gone[pid] && s.react != nil && s.react(pid, sig) {
		s.exit(pid)
	}
}

// exit ends pid: it leaves the tree and its pins become ready.
func (s *fakeSignaler) exit(pid int) {
	s.gone[pid] = true
	s.proc.remove(pid)
	for p, q := range s.pins {
		if q == pid {
			s.ready = append(s.ready, p)
		}
	}
}

func (s *fakeSignaler) Wait(timeout time.Duration) ([]Pin, error) {
	if s.onWait != nil {
		s.onWait()
	}
	if len(s.ready) == 0 {
		s.now += timeout
		return nil, nil
	}
	s.now += time.Millisecond
	out := s.ready
	s.ready = nil
	return out, nil
}

func (s *fakeSignaler) Status(Pin) (lineage.ExitStatus, bool) { return 0, false }
func (s *fakeSignaler) Release(p Pin)                         { delete(s.pins, p) }

// listed is a Source over a fixed set of identities, as long as the fake
// signaler has not ended them.
func listed(s *fakeSignaler, ids ...lineage.Identity) SourceFunc {
	return func() ([]lineage.Member, error) {
		var out []lineage.Member
		for _, id := range ids {
			if !s.gone[int(id.PID)] {
				out = append(out, lineage.Member{Identity: id})
			}
		}
		return out, nil
	}
}

func fakeReap(t *testing.T, f *fakeProc, s *fakeSignaler, src Source, opts Options) (Report, map[lineage.Identity]Outcome) {
	t.Helper()
	opts.ProcRoot, opts.Now = f.root, s.clock
	if opts.Signaler == nil {
		opts.Signaler = s
	}
	rep, err := Reap(context.Background(), src, opts)
	if err != nil {
		logReport(t, rep)
		t.Fatalf("Reap: %v", err)
	}
	out := make(map[lineage.Identity]Outcome)
	for _, o := range rep.Outcomes {
		if _, dup := out[o.Member.Identity]; dup {
			t.Errorf("%s appears twice", o.Member.Identity)
		}
		out[o.Member.Identity] = o
	}
	return rep, out
}

// In a fake /proc, a member's pid shows another start time: the stranger is
// never signalled. Nor are the other protected processes. A member in the
// reaper's own process group is reaped like any other: protection is by
// identity alone.
func TestFakeProcStranger(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	victim := f.add(fakeProcess{pid: 40001, start: 5000, argv: []string{"victim", "--flag"}})
	f.add(fakeProcess{pid: 40002, start: 7000})
	stranger := lineage.Identity{PID: 40002, StartTicks: 6000}
	kthread := f.add(fakeProcess{pid: 40003, start: 10, kernel: true})
	peer := f.add(fakeProcess{pid: 40004, start: 5000, pgrp: syscall.Getpgrp()})
	gone := lineage.Identity{PID: 40005, StartTicks: 5000}
	refused := f.add(fakeProcess{pid: 40006, start: 5000})
	parent, _ := readStat(os.Getppid())
	ids := []lineage.Identity{victim, stranger, kthread, peer, gone, refused, parent.id}

	rep, out := fakeReap(t, f, s, listed(s, ids...), Options{
		Contain: func() (lineage.Containment, error) { return "given", nil },
		Refuse: func(m lineage.Member, st lineage.Stat) (string, bool) {
			return "policy says no", m.Identity == refused
		},
	})
	if want := map[int][]string{40001: {"TERM"}, 40004: {"TERM"}}; !mapsEqual(s.sent, want) {
		t.Errorf("sent %v, want %v", s.sent, want)
	}
	for id, want := range map[lineage.Identity]struct {
		res    lineage.Result
		reason string
	}{
		victim:    {lineage.Terminated, ""},
		stranger:  {lineage.Vanished, "identity mismatch: pid 40002 now names a process started at 7000, not 6000"},
		kthread:   {lineage.Refused, "kernel thread"},
		peer:      {lineage.Terminated, ""},
		gone:      {lineage.Vanished, "free"},
		refused:   {lineage.Refused, "policy says no"},
		parent.id: {lineage.Refused, "ancestor"},
	} {
		if o := out[id]; o.Result != want.res || !strings.Contains(o.Reason, want.reason) {
			t.Errorf("%s: %s %q, want %s %q", id, o.Result, o.Reason, want.res, want.reason)
		}
	}
	if o := out[victim]; !slices.Equal(o.Argv, []string{"victim", "--flag"}) {
		t.Errorf("victim argv %q", o.Argv)
	}
	if o := out[stranger]; o.Argv != nil {
		t.Errorf("the stranger's argv %q was reported as the member's", o.Argv)
	}
	if len(rep.Outcomes) != len(ids) {
		t.Errorf("%d outcomes, want %d", len(rep.Outcomes), len(ids))
	}
}

func mapsEqual(a, b map[int][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// The signals each kind of member gets, in order, under each containment.
func TestFakeSequences(t *testing.T) {
	obeys := func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	ignores := func(pid int, sig syscall.Signal) bool { return false }
	given := func() (lineage.Containment, error) { return "kernel", nil }
	for _, tc := range []struct {
		name    string
		contain func() (lineage.Containment, error)
		state   string
		react   func(int, syscall.Signal) bool
		want    []string
		result  lineage.Result
	}{
		{"given/obeys", given, "S", obeys, []string{"TERM"}, lineage.Terminated},
		{"given/ignores", given, "S", ignores, []string{"TERM", "KILL"}, lineage.Killed},
		{"given/stopped obeys", given, "T", obeys, []string{"TERM", "CONT"}, lineage.Terminated},
		{"given/stopped ignores", given, "T", ignores, []string{"TERM", "CONT", "KILL"}, lineage.Killed},
		{"stop/obeys", nil, "S", obeys, []string{"STOP", "TERM", "CONT"}, lineage.Terminated},
		{"stop/ignores", nil, "S", ignores, []string{"STOP", "TERM", "CONT", "STOP", "KILL"}, lineage.Killed},
		{"stop/stopped ignores", nil, "T", ignores, []string{"STOP", "TERM", "CONT", "STOP", "KILL"}, lineage.Killed},
		{"stop contain/ignores", func() (lineage.Containment, error) { return lineage.ContainStop, nil }, "S", ignores, []string{"STOP", "TERM", "CONT", "STOP", "KILL"}, lineage.Killed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProc(t)
			s := newFakeSignaler(f)
			s.react = tc.react
			id := f.add(fakeProcess{pid: 40001, start: 5000, state: tc.state})
			grace := 2 * time.Second
			rep, out := fakeReap(t, f, s, listed(s, id), Options{Grace: grace, Contain: tc.contain})
			if o := out[id]; o.Result != tc.result || !slices.Equal(o.Sent, tc.want) || !slices.Equal(s.sent[40001], tc.want) {
				t.Errorf("%s, sent %v (signaler saw %v); want %s, %v", o.Result, o.Sent, s.sent[40001], tc.result, tc.want)
			}
			if tc.result == lineage.Killed && rep.Took < grace {
				t.Errorf("killed after %v, before the grace %v", rep.Took, grace)
			}
			if tc.result == lineage.Terminated && rep.Took >= grace {
				t.Errorf("took %v: waited for the grace", rep.Took)
			}
		})
	}
}

// Under the stop containment, a member that forks on TERM: the child is
// found during the grace, terminated, or stopped and killed with the rest.
func TestFakeForkOnTerm(t *testing.T) {
	for _, childObeys := range []bool{true, false} {
		t.Run(fmt.Sprintf("child obeys %v", childObeys), func(t *testing.T) {
			f := newFakeProc(t)
			s := newFakeSignaler(f)
			parent := f.add(fakeProcess{pid: 40001, start: 5000})
			members := []lineage.Identity{parent}
			var child lineage.Identity
			s.react = func(pid int, sig syscall.Signal) bool {
				if pid == 40001 && sig == syscall.SIGTERM {
					child = f.add(fakeProcess{pid: 40002, start: 5100})
					members = append(members, child)
				}
				return pid == 40002 && childObeys
			}
			src := SourceFunc(func() ([]lineage.Member, error) { return listed(s, members...)() })
			rep, out := fakeReap(t, f, s, src, Options{Grace: time.Second})
			if o := out[parent]; o.Result != lineage.Killed || !slices.Equal(o.Sent, []string{"STOP", "TERM", "CONT", "STOP", "KILL"}) {
				t.Errorf("parent: %s, sent %v", o.Result, o.Sent)
			}
			want, res := []string{"TERM", "STOP", "KILL"}, lineage.Killed
			if childObeys {
				want, res = []string{"TERM"}, lineage.Terminated
			}
			if o := out[child]; o.Result != res || !slices.Equal(o.Sent, want) {
				t.Errorf("child: %s, sent %v; want %s, %v", o.Result, o.Sent, res, want)
			}
			if len(rep.Outcomes) != 2 {
				t.Errorf("%d outcomes, want 2", len(rep.Outcomes))
			}
		})
	}
}

// Under the stop containment, a member forked just before the STOP landed
// shows up in a later pass and is stopped too; the set needs two quiet
// passes.
func TestFakeStopPasses(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	first := f.add(fakeProcess{pid: 40001, start: 5000})
	members := []lineage.Identity{first}
	lists := 0
	src := SourceFunc(func() ([]lineage.Member, error) {
		lists++
		if lists == 3 { // appears in the second stop pass
			members = append(members, f.add(fakeProcess{pid: 40002, start: 5001}))
		}
		return listed(s, members...)()
	})
	_, out := fakeReap(t, f, s, src, Options{Grace: 100 * time.Millisecond})
	for id, o := range out {
		if o.Result != lineage.Killed || o.Sent[0] != "STOP" {
			t.Errorf("%s: %s, sent %v; want stopped first, then killed", id, o.Result, o.Sent)
		}
	}
	if len(out) != 2 {
		t.Errorf("%d outcomes, want 2", len(out))
	}
}

// Keep spares, and a kept member is never signalled, even under the stop
// containment; Keep sees the argv read from /proc.
func TestFakeKeep(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(int, syscall.Signal) bool { return true }
	dev := f.add(fakeProcess{pid: 40001, start: 5000, argv: []string{"/usr/bin/devserver"}})
	other := f.add(fakeProcess{pid: 40002, start: 5000, argv: []string{"make"}})
	keep := func(m lineage.Member) (bool, string) {
		return len(m.Argv) > 0 && m.Argv[0] == "/usr/bin/devserver", "kept by exe"
	}
	_, out := fakeReap(t, f, s, listed(s, dev, other), Options{Keep: keep})
	if o := out[dev]; o.Result != lineage.Kept || o.Reason != "kept by exe" || len(s.sent[40001]) > 0 {
		t.Errorf("dev server: %s %q, sent %v", o.Result, o.Reason, s.sent[40001])
	}
	if o := out[other]; o.Result != lineage.Terminated {
		t.Errorf("make: %s", o.Result)
	}
}

// Members exiting on their own while the reaper lingers are exited, and
// nothing is signalled when all are gone by the end of the linger.
func TestFakeLinger(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	id := f.add(fakeProcess{pid: 40001, start: 5000})
	waits := 0
	s.onWait = func() {
		if waits++; waits == 3 {
			s.exit(40001)
		}
	}
	rep, out := fakeReap(t, f, s, listed(s, id), Options{Linger: time.Minute})
	if o := out[id]; o.Result != lineage.Exited || len(o.Sent) > 0 {
		t.Errorf("%s, sent %v; want exited, nothing sent", o.Result, o.Sent)
	}
	if rep.Containment != "" || rep.Took >= time.Minute {
		t.Errorf("containment %q, took %v", rep.Containment, rep.Took)
	}
}

// Ages come from the start time and the boot clock.
func TestFakeAge(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(int, syscall.Signal) bool { return true }
	id := f.add(fakeProcess{pid: 40001, start: 90000}) // 900 s after boot
	_, out := fakeReap(t, f, s, listed(s, id), Options{Contain: func() (lineage.Containment, error) { return "given", nil }})
	if o := out[id]; o.Age < 100*time.Second || o.Age > 101*time.Second {
		t.Errorf("age %v, want about 100s (the clock is at 1000s)", o.Age)
	}
}

// Out of file descriptors for pins, the reaper ends what it has pinned,
// frees those pins, and takes in the rest: every member is still ended.
func TestFakeOutOfPins(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.maxPins = 3
	var ids []lineage.Identity
	for pid := 40001; pid <= 40008; pid++ {
		ids = append(ids, f.add(fakeProcess{pid: pid, start: 5000}))
	}
	rep, out := fakeReap(t, f, s, listed(s, ids...), Options{Grace: time.Second, Contain: func() (lineage.Containment, error) { return "given", nil }})
	for _, id := range ids {
		if o := out[id]; o.Result != lineage.Killed {
			t.Errorf("%s: %s %q, sent %v; want killed", id, o.Result, o.Reason, o.Sent)
		}
	}
	if len(rep.Survivors) > 0 || len(s.pins) > 0 {
		t.Errorf("survivors %v, pins left %d", rep.Survivors, len(s.pins))
	}
}

// When the last live members exit on their TERM, the reaper lists the Source
// again at once to confirm the lineage is empty: it does not sit out a poll
// interval waiting for exits that can no longer come.
func TestFakeLastExitNeedsNoPoll(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	var ids []lineage.Identity
	for i := range 3 {
		ids = append(ids, f.add(fakeProcess{pid: 40100 + i, start: 5000}))
	}
	poll := 50 * time.Millisecond
	given := func() (lineage.Containment, error) { return "kernel", nil }
	rep, out := fakeReap(t, f, s, listed(s, ids...), Options{Grace: time.Second, Poll: poll, Contain: given})
	for _, id := range ids {
		if o := out[id]; o.Result != lineage.Terminated {
			t.Errorf("%s: %s, want terminated", id, o.Result)
		}
	}
	if rep.Phases.Terminate >= poll {
		t.Errorf("the terminate phase took %v on the reaper's clock: it waited out the poll interval %v after the last exit", rep.Phases.Terminate, poll)
	}
}

// With Options.Inspect, the members admitted together are checked with one
// call, and its answer is the check's: here it says each pid now names a
// process started later than the member (a stranger), so none is
// signalled. When Inspect fails, the reap says so and reads /proc instead.
func TestFakeInspect(t *testing.T) {
	given := func() (lineage.Containment, error) { return "kernel", nil }
	obeys := func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	setup := func(t *testing.T) (*fakeProc, *fakeSignaler, []lineage.Identity) {
		f := newFakeProc(t)
		s := newFakeSignaler(f)
		s.react = obeys
		var ids []lineage.Identity
		for i := range 3 {
			ids = append(ids, f.add(fakeProcess{pid: 40200 + i, start: 5000}))
		}
		return f, s, ids
	}
	t.Run("its answer decides", func(t *testing.T) {
		f, s, ids := setup(t)
		var calls [][]uint32
		inspect := func(pids []uint32, out []lineage.Stat) error {
			calls = append(calls, slices.Clone(pids))
			for i, pid := range pids {
				st, err := readFakeStat(f, pid)
				if err != nil {
					return err
				}
				st.StartTicks = 9999 // a stranger has the pid now
				out[i] = st
			}
			return nil
		}
		rep, out := fakeReap(t, f, s, listed(s, ids...), Options{Grace: time.Second, Contain: given, Inspect: inspect})
		for _, id := range ids {
			if o := out[id]; o.Result != lineage.Vanished || len(s.sent[int(id.PID)]) > 0 {
				t.Errorf("%s: %s (%s), signaller saw %v; want vanished, nothing sent", id, o.Result, o.Reason, s.sent[int(id.PID)])
			}
		}
		if len(calls) != 1 || len(calls[0]) != len(ids) {
			t.Errorf("Inspect calls %v, want one with the %d members", calls, len(ids))
		}
		if len(rep.Warnings) > 0 {
			t.Errorf("warnings %q", rep.Warnings)
		}
	})
	t.Run("failing, /proc instead", func(t *testing.T) {
		f, s, ids := setup(t)
		calls := 0
		inspect := func([]uint32, []lineage.Stat) error { calls++; return errors.New("no batch check here") }
		rep, out := fakeReap(t, f, s, listed(s, ids...), Options{Grace: time.Second, Contain: given, Inspect: inspect})
		for _, id := range ids {
			if o := out[id]; o.Result != lineage.Terminated {
				t.Errorf("%s: %s (%s), want terminated", id, o.Result, o.Reason)
			}
		}
		if calls != 1 || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "no batch check here") {
			t.Errorf("%d calls, warnings %q; want one call and one warning naming the error", calls, rep.Warnings)
		}
	})
}

func readFakeStat(f *fakeProc, pid uint32) (lineage.Stat, error) {
	b, err := os.ReadFile(filepath.Join(f.root, strconv.Itoa(int(pid)), "stat"))
	if err != nil {
		return lineage.Stat{}, err
	}
	return lineage.ParseStat(int(pid), b, "")
}

// Options.ReapChild is asked about each member seen to exit that was the
// reaper's child when checked, and about no other; the status it returns
// is the member's.
func TestFakeReapChild(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	child := f.add(fakeProcess{pid: 40301, ppid: os.Getpid(), start: 5000})
	stranger := f.add(fakeProcess{pid: 40302, start: 5000})
	var asked []int
	reapChild := func(pid int) (lineage.ExitStatus, bool) {
		asked = append(asked, pid)
		return lineage.ExitStatus(syscall.SIGTERM), true
	}
	given := func() (lineage.Containment, error) { return "kernel", nil }
	_, out := fakeReap(t, f, s, listed(s, child, stranger), Options{Grace: time.Second, Contain: given, ReapChild: reapChild})
	if !slices.Equal(asked, []int{int(child.PID)}) {
		t.Errorf("ReapChild asked about %v, want only the child %d", asked, child.PID)
	}
	if o := out[child]; o.Result != lineage.Terminated || o.Status == nil || *o.Status != lineage.ExitStatus(syscall.SIGTERM) {
		t.Errorf("child: %s, status %v; want terminated with the status ReapChild gave", o.Result, o.Status)
	}
	if o := out[stranger]; o.Result != lineage.Terminated || o.Status != nil {
		t.Errorf("stranger: %s, status %v; want terminated, no status", o.Result, o.Status)
	}
}

// batchSignaler is the fake signaler with SendAll, which counts its calls.
type batchSignaler struct {
	*fakeSignaler
	calls [][]string // each call's signals
}

func (b *batchSignaler) SendAll(pins []Pin, sigs []syscall.Signal, errs []error) {
	var names []string
	for i, p := range pins {
		errs[i] = b.Send(p, sigs[i])
		names = append(names, lineage.SignalName(sigs[i]))
	}
	b.calls = append(b.calls, names)
}

// With a BatchSignaler, the members admitted together are signalled in one
// call per signal: the SIGKILL of those that ignore SIGTERM, the SIGTERM of
// those that obey, then the SIGCONT of the one that was stopped.
func TestFakeBatchSignals(t *testing.T) {
	f := newFakeProc(t)
	s := &batchSignaler{fakeSignaler: newFakeSignaler(f)}
	s.react = func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	var ids []lineage.Identity
	for i := range 4 {
		ids = append(ids, f.add(fakeProcess{pid: 40400 + i, start: 5000}))
	}
	stopped := f.add(fakeProcess{pid: 40410, start: 5000, state: "T"})
	deaf := []lineage.Identity{
		f.add(fakeProcess{pid: 40411, start: 5000, ignoresTerm: true}),
		f.add(fakeProcess{pid: 40412, start: 5000, ignoresTerm: true}),
	}
	given := func() (lineage.Containment, error) { return "kernel", nil }
	all := append(append(slices.Clone(ids), stopped), deaf...)
	_, out := fakeReap(t, f, s.fakeSignaler, listed(s.fakeSignaler, all...), Options{Grace: time.Second, Contain: given, Signaler: s})
	for _, id := range append(ids, stopped) {
		if o := out[id]; o.Result != lineage.Terminated {
			t.Errorf("%s: %s, want terminated", id, o.Result)
		}
	}
	for _, id := range deaf {
		if o := out[id]; o.Result != lineage.Killed || o.Reason != whyIgnoresTerm {
			t.Errorf("a member that ignores SIGTERM: %s (%s)", o.Result, o.Reason)
		}
	}
	want := [][]string{{"KILL", "KILL"}, {"TERM", "TERM", "TERM", "TERM", "TERM"}}
	if len(s.calls) < 2 || !slices.Equal(s.calls[0], want[0]) || !slices.Equal(s.calls[1], want[1]) {
		t.Errorf("SendAll calls %v, want %v first", s.calls, want)
	}
	if !slices.Equal(s.sent[int(stopped.PID)], []string{"TERM", "CONT"}) {
		t.Errorf("the stopped member was sent %v, want TERM then CONT", s.sent[int(stopped.PID)])
	}
}
