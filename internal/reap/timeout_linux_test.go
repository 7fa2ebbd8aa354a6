//go:build linux

package reap

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// A member in uninterruptible sleep survives SIGKILL for as long as it
// likes: past Options.Timeout the reap stops and reports it as survived,
// with why.
func TestFakeTimeoutStuckMember(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM && pid != 40001 }
	stuck := f.add(fakeProcess{pid: 40001, start: 5000, state: "D"})
	fine := f.add(fakeProcess{pid: 40002, start: 5000})
	s.stuck = map[int]bool{40001: true}
	start := s.now
	rep, err := Reap(context.Background(), listed(s, stuck, fine), Options{
		ProcRoot: f.root, Signaler: s, Now: s.clock,
		Grace: time.Second, Timeout: 10 * time.Second,
		Contain: func() (lineage.Containment, error) { return "given", nil },
	})
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrSurvivors) {
		logReport(t, rep)
		t.Fatalf("Reap: %v, want ErrTimeout and ErrSurvivors", err)
	}
	if took := s.now - start; took < 10*time.Second || took > 11*time.Second {
		t.Errorf("returned after %v, want about the 10s timeout", took)
	}
	out := make(map[lineage.Identity]Outcome)
	for _, o := range rep.Outcomes {
		out[o.Member.Identity] = o
	}
	if o := out[stuck]; o.Result != lineage.Survived || !strings.Contains(o.Reason, "timed out") || !strings.Contains(o.Reason, "state D") {
		t.Errorf("stuck member: %s %q, want survived, timed out, last seen in state D", o.Result, o.Reason)
	}
	if o := out[fine]; o.Result != lineage.Terminated {
		t.Errorf("the other member: %s %q, want terminated", o.Result, o.Reason)
	}
	if len(rep.Survivors) != 1 || rep.Survivors[0] != stuck {
		t.Errorf("survivors %v, want [%s]", rep.Survivors, stuck)
	}
}

// A kept member that forks without end keeps the kill passes going: the
// timeout ends them.
func TestFakeTimeoutKeptForker(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.react = func(pid int, sig syscall.Signal) bool { return sig == syscall.SIGTERM }
	kept := f.add(fakeProcess{pid: 40001, start: 5000})
	next := 40002
	src := SourceFunc(func() ([]lineage.Member, error) {
		// Every listing finds one more child of the kept member.
		child := f.add(fakeProcess{pid: next, start: 6000})
		next++
		ms := []lineage.Member{{Identity: kept}}
		for pid := 40002; pid < next; pid++ {
			if !s.gone[pid] {
				ms = append(ms, lineage.Member{Identity: lineage.Identity{PID: uint32(pid), StartTicks: 6000}})
			}
		}
		_ = child
		return ms, nil
	})
	start := s.now
	rep, err := Reap(context.Background(), src, Options{
		ProcRoot: f.root, Signaler: s, Now: s.clock,
		Grace: time.Second, Timeout: 1200 * time.Millisecond,
		Contain: func() (lineage.Containment, error) { return "given", nil },
		Keep:    func(m lineage.Member) (bool, string) { return m.Identity == kept, "kept" },
	})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Reap: %v, want ErrTimeout", err)
	}
	if took := s.now - start; took > 2*time.Second {
		t.Errorf("returned after %v, want about the 1.2s timeout", took)
	}
	if rep.Count(lineage.Kept) != 1 {
		t.Errorf("%d kept, want 1", rep.Count(lineage.Kept))
	}
}

func TestReapNegativeTimeout(t *testing.T) {
	src := SourceFunc(func() ([]lineage.Member, error) { t.Error("Source called"); return nil, nil })
	if _, err := Reap(context.Background(), src, Options{Timeout: -1}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("negative timeout: %v, want lineage.ErrInvalid", err)
	}
}

// failTerm is a Signaler whose SIGTERM to one pid fails as if not
// permitted.
type failTerm struct {
	*recorder
	pid int
}

func (f *failTerm) Send(p Pin, sig syscall.Signal) error {
	if sig == syscall.SIGTERM && f.pids[p] == f.pid {
		return syscall.EPERM
	}
	return f.recorder.Send(p, sig)
}

// A member the stop containment stopped and the reap could not end, here
// because its SIGTERM fails, is not left stopped: it gets SIGCONT.
func TestReapResumesStoppedSurvivor(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 63 & echo ready; wait")
	stuck := j.find("sleep", "63")[0]
	sig := &failTerm{recorder: realSignaler(t), pid: int(stuck.PID)}
	rep, err := Reap(context.Background(), j, Options{Grace: 10 * time.Second, Poll: 5 * time.Millisecond, Signaler: sig})
	if !errors.Is(err, ErrSurvivors) {
		t.Fatalf("Reap: %v, want ErrSurvivors", err)
	}
	var o Outcome
	for _, oc := range rep.Outcomes {
		if oc.Member.Identity == stuck {
			o = oc
		}
	}
	if o.Result != lineage.Survived || !slices.Equal(o.Sent, []string{"STOP", "CONT"}) {
		t.Errorf("%s: %s %q, sent %v; want survived, sent STOP then CONT", stuck, o.Result, o.Reason, o.Sent)
	}
	if st, ok := readStat(int(stuck.PID)); !ok || st.state == "T" {
		t.Errorf("%s: state %q after the reap, want it running", stuck, st.state)
	}
}

// When ctx ends mid-reap, a member the stop containment stopped and that
// the policy refuses from then on is resumed, not left stopped.
func TestReapCanceledResumesRefused(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 64 & echo ready; wait")
	target := j.find("sleep", "64")[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := realSignaler(t)
	refuse := false
	rep, err := Reap(ctx, j, Options{
		Grace: 10 * time.Second, Poll: 5 * time.Millisecond, Signaler: sig,
		Refuse: func(m lineage.Member, _ lineage.Stat) (string, bool) {
			if m.Identity != target {
				return "", false
			}
			if slices.Contains(sig.sentTo(int(target.PID)), "STOP") {
				refuse = true
				cancel() // the reap is cut short right after the stop
			}
			return "protected since", refuse
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Reap: %v, want context.Canceled", err)
	}
	for _, o := range rep.Outcomes {
		if o.Member.Identity == target && (o.Result != lineage.Refused || !slices.Equal(o.Sent, []string{"STOP", "CONT"})) {
			t.Errorf("%s: %s %q, sent %v; want refused, sent STOP then CONT", target, o.Result, o.Reason, o.Sent)
		}
	}
	if st, ok := readStat(int(target.PID)); !ok || st.state == "T" {
		t.Errorf("%s: state %q after the reap, want it running", target, st.state)
	}
}
