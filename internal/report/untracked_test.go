package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// A job whose membership map filled (--on-full=kill): the kernel killed
// two children at birth (their forks say untracked and contained; no exit
// of theirs can come, they were never members). The report shows them
// ended at birth, killed, for that reason; the untracked count is of
// processes, not of lost events; and none of them outlived the root or has
// an unknown end.
func TestMembershipFullKillsAreShownKilledAtBirth(t *testing.T) {
	var buf bytes.Buffer
	now := 100 * time.Second
	w := jobWriter(t, &buf, &now)
	root, tracked := id(4000, 10000), id(4001, 10001)
	killed := []lineage.Identity{id(4002, 10002), id(4003, 10002)}
	at := func(ms int) time.Duration { return 100*time.Second + time.Duration(ms)*time.Millisecond }
	evs := []lineage.Event{
		{Kind: lineage.EventFork, Time: at(0), Process: root, Parent: id(50, 100), Root: root, IsRoot: true, Comm: "sh"},
		{Kind: lineage.EventFork, Time: at(1), Process: tracked, Parent: root, Root: root, Comm: "sh"},
		{Kind: lineage.EventExit, Time: at(5), Process: tracked, Parent: root, Root: root, Comm: "true"},
	}
	for _, k := range killed {
		evs = append(evs, lineage.Event{Kind: lineage.EventFork, Time: at(2), Process: k, Parent: root, Root: root, Comm: "sh", Untracked: true, Contained: true})
	}
	evs = append(evs, lineage.Event{Kind: lineage.EventExit, Time: at(10), Process: root, Parent: id(50, 100), Root: root, Comm: "sh"})
	for _, e := range evs {
		must(t, w.Event(e))
	}
	now = at(20)
	must(t, w.LossOf(2, "untracked: the membership map was full"))
	rep := build(t, buf.Bytes())

	procs := map[lineage.Identity]*Process{}
	rep.Walk(func(p *Process) bool { procs[p.ID] = p; return true })
	for _, k := range killed {
		p := procs[k]
		if p == nil {
			t.Fatalf("%v not in the report", k)
		}
		if !p.Ended || p.End != at(2) || p.Exit == nil || p.Exit.Signal != "KILL" || p.Reason != untrackedKilled || p.Outcome != lineage.Exited {
			t.Errorf("%v: ended %v at %v, exit %v, reason %q, outcome %s; want ended at its fork by KILL for the full map", k, p.Ended, p.End, p.Exit, p.Reason, p.Outcome)
		}
	}
	s := rep.Summary
	if s.Lost != 0 || s.Losses != 1 || s.Unended != 0 || s.OutlivedRoot != 0 {
		t.Errorf("summary lost %d in %d losses, %d unended, %d outlived; want 0 lost in 1, none unended or outliving", s.Lost, s.Losses, s.Unended, s.OutlivedRoot)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"0 end unknown, 0 events lost", "pid 4002 +0.002s lived 0.000s  signal KILL (killed at birth: the membership map was full",
		"pid 4003 +0.002s lived 0.000s  signal KILL (killed at birth", "killed at birth or let run untracked"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "could not deliver") {
		t.Errorf("the text says events were lost:\n%s", out)
	}
}
