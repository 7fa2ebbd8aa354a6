package tracker

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// TestRecorderKeepsOnlyItsRoot: events that come before Spawn returns the
// root wait, and only the root's lineage is written — not the Go runtime's
// probe that the bpf backend may report as a root of its own, nor another
// job's.
func TestRecorderKeepsOnlyItsRoot(t *testing.T) {
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, record.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: 100, StartTicks: 5}
	probe := lineage.Identity{PID: 99, StartTicks: 5}
	other := lineage.Identity{PID: 300, StartTicks: 1}
	child := lineage.Identity{PID: 101, StartTicks: 6}
	r := &recorder{w: w}
	r.event(lineage.Event{Kind: lineage.EventFork, Process: probe, Root: probe, IsRoot: true})
	r.event(lineage.Event{Kind: lineage.EventFork, Process: root, Root: root, IsRoot: true})
	r.event(lineage.Event{Kind: lineage.EventExit, Process: probe, Root: probe})
	r.rooted(root)
	r.event(lineage.Event{Kind: lineage.EventFork, Process: child, Parent: root, Root: root})
	r.event(lineage.Event{Kind: lineage.EventFork, Process: other, Root: other, IsRoot: true})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := record.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []lineage.Identity
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Process)
	}
	if len(got) != 2 || got[0] != root || got[1] != child {
		t.Errorf("recorded %v, want the root then its child", got)
	}
}

func TestEndReason(t *testing.T) {
	for _, tt := range []struct {
		end  job.End
		want string
	}{
		{job.End{Exited: true}, "root exited"},
		{job.End{Deadline: true}, "deadline"},
		{job.End{Interrupted: fakeSignal{}}, "interrupted"},
		{job.End{Interrupted: fakeSignal{}, Exited: true}, "root exited"},
	} {
		if got := endReason(tt.end); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.end, got, tt.want)
		}
	}
	if !strings.Contains(backendLimits("proc")[0], "between two scans") || backendLimits("bpf") != nil {
		t.Error("backend limits")
	}
}

type fakeSignal struct{}

func (fakeSignal) String() string { return "fake" }
func (fakeSignal) Signal()        {}
