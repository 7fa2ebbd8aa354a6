package poll

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// diffSelf is the supervisor the tracker runs in: orphans reparent to it.
var diffSelf = lineage.Stat{Identity: lineage.Identity{PID: 50, StartTicks: 10}, PPID: 1, PGRP: 50, Session: 50, State: "S", Comm: "lineage", Threads: 1}

// TestProcTrackerDiff is the diff core's table. Each row registers its roots
// (spawned ones are children of diffSelf) as of the first scan, lets the
// tracker adopt what that scan shows, then feeds it the later scans and
// checks the events those produce and the members left.
//
// A process reads "PID@START key=value…" (ppid, comm, state, stack, exit,
// threads, session, pgrp; defaults: ppid 1, comm sh, state S, one thread,
// stack 7, session and group its own pid) with the flags "kernel" and
// "unreadable"; "reaped PID STATUS" is the reaper's report before a scan.
// An event reads "fork ID parent=ID root=ID", "fork ID untracked",
// "exec ID COMM" or "exit ID STATUS|unknown"; a member "ID", or "ID exited"
// while its zombie waits.
func TestProcTrackerDiff(t *testing.T) {
	table := []struct {
		name    string
		roots   []string // "ID" registered, "spawned ID"
		scans   [][]string
		events  []string
		members []string
	}{
		{
			name:  "fork of a member's child",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "101@1010 ppid=100"},
			},
			events:  []string{"fork 101@1010 parent=100@1000 root=100@1000"},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "fork and exec between two scans",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "101@1010 ppid=100 comm=sleep stack=9"},
			},
			events:  []string{"fork 101@1010 parent=100@1000 root=100@1000", "exec 101@1010 sleep"},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "parents before children, whatever their pids",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "105@1010 ppid=100", "103@1020 ppid=105"},
			},
			events:  []string{"fork 105@1010 parent=100@1000 root=100@1000", "fork 103@1020 parent=105@1010 root=100@1000"},
			members: []string{"100@1000", "105@1010", "103@1020"},
		},
		{
			name:  "a reparented orphan of a double fork stays a member",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100", "102@1020 ppid=101"},
				{"100@1000", "102@1020 ppid=1"},
			},
			events:  []string{"exit 101@1010 unknown"},
			members: []string{"100@1000", "102@1020"},
		},
		{
			name:  "pid reuse: a stranger, and the old member exited",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@5000 ppid=1", "102@5010 ppid=101"},
			},
			events:  []string{"exit 101@1010 unknown"},
			members: []string{"100@1000"},
		},
		{
			name:  "pid reuse by a new child of a member",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@5000 ppid=100"},
			},
			events:  []string{"exit 101@1010 unknown", "fork 101@5000 parent=100@1000 root=100@1000"},
			members: []string{"100@1000", "101@5000"},
		},
		{
			name:  "a process older than its parent is not its child",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "102@900 ppid=100"},
			},
			members: []string{"100@1000"},
		},
		{
			name:  "exec seen by a new command name",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100 comm=sleep"},
			},
			events:  []string{"exec 101@1010 sleep"},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "exec seen by a new stack address",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100 stack=9"},
			},
			events:  []string{"exec 101@1010 sh"},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "an unknown stack address is no exec",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100 stack=0"},
			},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "a zombie has exited, with the status of field 52, once",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100 state=Z stack=0 exit=768"},
				{"100@1000", "101@1010 ppid=100 state=Z stack=0 exit=768"},
			},
			events:  []string{"exit 101@1010 768"},
			members: []string{"100@1000", "101@1010 exited"},
		},
		{
			name:  "a reaped zombie leaves without a second exit",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100 state=Z stack=0 exit=768"},
				{"100@1000"},
			},
			events:  []string{"exit 101@1010 768"},
			members: []string{"100@1000"},
		},
		{
			name:  "a zombie leader with live threads is alive",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100 state=Z threads=3"},
			},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "the reaper's status wins over field 52",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"reaped 101 9", "100@1000", "101@1010 ppid=100 state=Z stack=0 exit=-1"},
			},
			events:  []string{"exit 101@1010 9"},
			members: []string{"100@1000", "101@1010 exited"},
		},
		{
			name:  "gone, with the status the reaper reported",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"reaped 101 9", "100@1000"},
			},
			events:  []string{"exit 101@1010 9"},
			members: []string{"100@1000"},
		},
		{
			name:  "a root's exit",
			roots: []string{"spawned 100@1000"},
			scans: [][]string{
				{"100@1000 ppid=50"},
				{"100@1000 ppid=50 state=Z stack=0 exit=256"},
			},
			events:  []string{"exit 100@1000 256"},
			members: []string{"100@1000 exited"},
		},
		{
			name:  "an exit reported for a process never seen tells nothing",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "555@900"},
				{"reaped 777 9", "reaped 555 0", "100@1000"},
			},
			members: []string{"100@1000"},
		},
		{
			name:  "a member that can't be read is left as it was",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 unreadable"},
			},
			members: []string{"100@1000", "101@1010"},
		},
		{
			name:  "kernel threads are ignored",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "101@1010 ppid=100 kernel"},
			},
			members: []string{"100@1000"},
		},
		{
			name:  "an orphan comes from the only spawned root",
			roots: []string{"spawned 200@1000"},
			scans: [][]string{
				{"200@1000 ppid=50"},
				{"200@1000 ppid=50", "400@1200 ppid=50 comm=daemon"},
			},
			events:  []string{"fork 400@1200 parent=0@0 root=200@1000", "exec 400@1200 daemon"},
			members: []string{"200@1000", "400@1200"},
		},
		{
			name:  "an orphan older than every spawned root is left alone",
			roots: []string{"spawned 200@1000"},
			scans: [][]string{
				{"200@1000 ppid=50"},
				{"200@1000 ppid=50", "400@900 ppid=50"},
			},
			members: []string{"200@1000"},
		},
		{
			name:  "with registered roots only, a new child of ours is no orphan",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "400@1200 ppid=50"},
			},
			members: []string{"100@1000"},
		},
		{
			name:  "two spawned roots: an orphan in no one's session is untracked",
			roots: []string{"spawned 200@1000", "spawned 300@1100"},
			scans: [][]string{
				{"200@1000 ppid=50", "300@1100 ppid=50"},
				{"200@1000 ppid=50", "300@1100 ppid=50", "400@1200 ppid=50"},
			},
			events:  []string{"fork 400@1200 untracked"},
			members: []string{"200@1000", "300@1100"},
		},
		{
			name:  "two spawned roots: an orphan in a member's session is its root's",
			roots: []string{"spawned 200@1000", "spawned 300@1100"},
			scans: [][]string{
				{"200@1000 ppid=50", "300@1100 ppid=50", "201@1010 ppid=200"},
				{"200@1000 ppid=50", "300@1100 ppid=50", "201@1010 ppid=200", "400@1200 ppid=50 session=201"},
			},
			events:  []string{"fork 400@1200 parent=0@0 root=200@1000", "exec 400@1200 sh"},
			members: []string{"200@1000", "201@1010", "300@1100", "400@1200"},
		},
		{
			name:  "two spawned roots: an orphan in the session a gone member led",
			roots: []string{"spawned 200@1000", "spawned 300@1100"},
			scans: [][]string{
				{"200@1000 ppid=50", "300@1100 ppid=50", "301@1110 ppid=300"},
				{"200@1000 ppid=50", "300@1100 ppid=50", "400@1200 ppid=50 session=301"},
			},
			events:  []string{"exit 301@1110 unknown", "fork 400@1200 parent=0@0 root=300@1100", "exec 400@1200 sh"},
			members: []string{"200@1000", "300@1100", "400@1200"},
		},
		{
			// A scan is not atomic: member 101 was read, then died; a
			// stranger took pid 101 and forked 102, read as 101's child.
			// The poller found 101's stat file (bound to the member) gone
			// right after reading 102: 102 is not adopted, and is judged
			// again at the next scan, where its parent is the stranger.
			name:  "a stranger's child read as a member's after the member died",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100", "102@1030 ppid=101 parentlost"},
				{"100@1000", "101@1020 ppid=1", "102@1030 ppid=101"},
			},
			events:  []string{"exit 101@1010 unknown"},
			members: []string{"100@1000"},
		},
		{
			// The same, but 102 was the member's own child: reparented to
			// this process (a subreaper), it is found at the next scan.
			name:  "a member's child whose parent died during the scan",
			roots: []string{"spawned 100@1000"},
			scans: [][]string{
				{"100@1000 ppid=50", "101@1010 ppid=100"},
				{"100@1000 ppid=50", "101@1010 ppid=100", "102@1030 ppid=101 parentlost"},
				{"100@1000 ppid=50", "102@1030 ppid=50"},
			},
			events:  []string{"exit 101@1010 unknown", "fork 102@1030 parent=0@0 root=100@1000", "exec 102@1030 sh"},
			members: []string{"100@1000", "102@1030"},
		},
		{
			// 101's parent was lost during scan 2, so 101 waited; its
			// children, read in the same scan, waited too, and must follow
			// it in when it is adopted, though scan 3 sees them again.
			name:  "the children of a deferred process follow it in",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000"},
				{"100@1000", "101@1010 ppid=100 parentlost", "102@1020 ppid=101", "103@1030 ppid=102"},
				{"100@1000", "101@1010 ppid=100", "102@1020 ppid=101", "103@1030 ppid=102"},
			},
			events: []string{
				"fork 101@1010 parent=100@1000 root=100@1000",
				"fork 102@1020 parent=101@1010 root=100@1000",
				"fork 103@1030 parent=102@1020 root=100@1000",
			},
			members: []string{"100@1000", "101@1010", "102@1020", "103@1030"},
		},
		{
			// 102 was seen once under a parent never adopted (lost during
			// the scan, then dead); reparented to this process, it is an
			// orphan of the spawned root like any other.
			name:  "a process seen before is judged when it reparents to us",
			roots: []string{"spawned 100@1000"},
			scans: [][]string{
				{"100@1000 ppid=50"},
				{"100@1000 ppid=50", "101@1010 ppid=100 parentlost", "102@1020 ppid=101"},
				{"100@1000 ppid=50", "102@1020 ppid=50"},
			},
			events:  []string{"fork 102@1020 parent=0@0 root=100@1000", "exec 102@1020 sh"},
			members: []string{"100@1000", "102@1020"},
		},
		{
			name:  "a stranger seen before stays a stranger",
			roots: []string{"spawned 100@1000"},
			scans: [][]string{
				{"100@1000 ppid=50", "300@900 ppid=1"},
				{"100@1000 ppid=50", "300@900 ppid=1"},
				{"100@1000 ppid=50", "300@900 ppid=1"},
			},
			members: []string{"100@1000"},
		},
		{
			name:  "a member's child, its parent confirmed",
			roots: []string{"100@1000"},
			scans: [][]string{
				{"100@1000", "101@1010 ppid=100"},
				{"100@1000", "101@1010 ppid=100", "102@1030 ppid=101"},
			},
			events:  []string{"fork 102@1030 parent=101@1010 root=100@1000"},
			members: []string{"100@1000", "101@1010", "102@1030"},
		},
		{
			name:  "two spawned roots: a group this process shares tells nothing",
			roots: []string{"spawned 200@1000", "spawned 300@1100"},
			scans: [][]string{
				{"200@1000 ppid=50 session=50", "300@1100 ppid=50"},
				{"200@1000 ppid=50 session=50", "300@1100 ppid=50", "400@1200 ppid=50 session=50"},
			},
			events:  []string{"fork 400@1200 untracked"},
			members: []string{"200@1000", "300@1100"},
		},
	}
	for _, row := range table {
		t.Run(row.name, func(t *testing.T) {
			tr := newProcTracker(diffSelf)
			scans := make([]*procScan, len(row.scans))
			for i, lines := range row.scans {
				scans[i] = parseDiffScan(t, lines, time.Duration(i+1)*time.Second)
			}
			for _, r := range row.roots {
				spawned := strings.HasPrefix(r, "spawned ")
				st := scans[0].procs[int(parseDiffID(t, strings.TrimPrefix(r, "spawned ")).PID)]
				tr.addRoot(st, diffSelf.Identity, spawned, scans[0], "/bin/sh", []string{"sh"})
			}
			tr.diff(nil, scans[0])
			var got []string
			for i := 1; i < len(scans); i++ {
				for _, ev := range tr.diff(scans[i-1].procs, scans[i]) {
					got = append(got, diffEventString(ev))
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(row.events))
			if !slices.Equal(got, want) {
				t.Errorf("events:\n got %q\nwant %q", got, want)
			}
			var members []string
			for _, m := range tr.members {
				s := m.Identity.String()
				if m.Exited {
					s += " exited"
				}
				members = append(members, s)
			}
			slices.Sort(members)
			if wantM := slices.Sorted(slices.Values(row.members)); !slices.Equal(members, wantM) {
				t.Errorf("members:\n got %q\nwant %q", members, wantM)
			}
		})
	}
}

// Events come in an order a tree can follow: a process's FORK before its
// children's, its EXEC after its FORK.
func TestProcTrackerDiffOrdersForksParentsFirst(t *testing.T) {
	tr := newProcTracker(diffSelf)
	s0 := parseDiffScan(t, []string{"100@1000"}, time.Second)
	tr.addRoot(s0.procs[100], diffSelf.Identity, false, s0, "/bin/sh", []string{"sh"})
	tr.diff(nil, s0)
	s1 := parseDiffScan(t, []string{"100@1000", "109@1010 ppid=100 comm=a", "103@1020 ppid=109 comm=b", "101@1030 ppid=103 comm=c"}, 2*time.Second)
	var got []string
	for _, ev := range tr.diff(s0.procs, s1) {
		got = append(got, diffEventString(ev))
	}
	want := []string{
		"fork 109@1010 parent=100@1000 root=100@1000", "exec 109@1010 a",
		"fork 103@1020 parent=109@1010 root=100@1000", "exec 103@1020 b",
		"fork 101@1030 parent=103@1020 root=100@1000", "exec 101@1030 c",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	if tr.counts.Forks != 4 || tr.counts.Execs != 4 {
		t.Errorf("counts %+v, want 4 forks and 4 execs (the root's included)", tr.counts)
	}
}

func TestProcTrackerCountsStaleAndUnattributed(t *testing.T) {
	tr := newProcTracker(diffSelf)
	s0 := parseDiffScan(t, []string{"200@1000 ppid=50", "300@1100 ppid=50", "201@1010 ppid=200"}, time.Second)
	for _, pid := range []int{200, 300} {
		tr.addRoot(s0.procs[pid], diffSelf.Identity, true, s0, "/bin/sh", []string{"sh"})
	}
	tr.diff(nil, s0)
	s1 := parseDiffScan(t, []string{"200@1000 ppid=50", "300@1100 ppid=50", "201@9000", "400@1200 ppid=50"}, 2*time.Second)
	tr.diff(s0.procs, s1)
	if tr.counts.Stale != 1 || tr.unattributed != 1 || tr.counts.Exits != 1 {
		t.Errorf("stale %d, unattributed %d, exits %d; want 1 each", tr.counts.Stale, tr.unattributed, tr.counts.Exits)
	}
	// Contain and Uncontain mark the root's reap and its end.
	other := lineage.Identity{PID: 300, StartTicks: 1100}
	if err := tr.contain(other); err != nil || !tr.roots[other].reaping {
		t.Errorf("contain: %v, reaping %v", err, tr.roots[other].reaping)
	}
	if err := tr.uncontain(other); err != nil || tr.roots[other].reaping {
		t.Errorf("uncontain: %v, reaping %v", err, tr.roots[other].reaping)
	}
	// Forget drops the root and its members; Contain needs a root.
	if err := tr.forget(lineage.Identity{PID: 200, StartTicks: 1000}); err != nil {
		t.Fatal(err)
	}
	if tr.isMember(lineage.Identity{PID: 200, StartTicks: 1000}) {
		t.Errorf("a forgotten root is still a member")
	}
	if err := tr.contain(lineage.Identity{PID: 200, StartTicks: 1000}); err == nil {
		t.Errorf("contain of a forgotten root: no error")
	}
	if err := tr.uncontain(lineage.Identity{PID: 200, StartTicks: 1000}); !errors.Is(err, loader.ErrNotRoot) {
		t.Errorf("uncontain of a forgotten root: %v", err)
	}
}

func parseDiffID(t *testing.T, s string) lineage.Identity {
	t.Helper()
	pid, start, ok := strings.Cut(s, "@")
	p, err1 := strconv.ParseUint(pid, 10, 32)
	st, err2 := strconv.ParseUint(start, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("bad identity %q", s)
	}
	return lineage.Identity{PID: uint32(p), StartTicks: st}
}

// parseDiffScan reads a scan written as TestProcTrackerDiff's rows write it.
func parseDiffScan(t *testing.T, lines []string, now time.Duration) *procScan {
	t.Helper()
	s := newProcScan()
	s.now = now
	s.reaped = map[int]lineage.ExitStatus{}
	for _, line := range lines {
		f := strings.Fields(line)
		if f[0] == "reaped" {
			pid, _ := strconv.Atoi(f[1])
			status, _ := strconv.Atoi(f[2])
			s.reaped[pid] = lineage.ExitStatus(status)
			continue
		}
		id := parseDiffID(t, f[0])
		st := lineage.Stat{Identity: id, PPID: 1, PGRP: int(id.PID), Session: int(id.PID), State: "S", Comm: "sh", Threads: 1, StartStack: 7}
		unreadable := false
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "ppid":
				st.PPID = n
			case "comm":
				st.Comm = v
			case "state":
				st.State = v
			case "stack":
				st.StartStack = uint64(n)
			case "exit":
				st.ExitCode = lineage.ExitStatus(n)
			case "threads":
				st.Threads = n
			case "session":
				st.Session = n
			case "pgrp":
				st.PGRP = n
			case "kernel":
				st.Kernel = true
			case "unreadable":
				unreadable = true
			case "parentlost":
				s.parentLost[int(id.PID)] = true
			default:
				t.Fatalf("bad process %q", line)
			}
		}
		if unreadable {
			s.unreadable[int(id.PID)] = true
		} else {
			s.procs[int(id.PID)] = st
		}
	}
	return s
}

func diffEventString(ev lineage.Event) string {
	switch ev.Kind {
	case lineage.EventFork:
		if ev.Untracked {
			return fmt.Sprintf("fork %s untracked", ev.Process)
		}
		return fmt.Sprintf("fork %s parent=%s root=%s", ev.Process, ev.Parent, ev.Root)
	case lineage.EventExec:
		return fmt.Sprintf("exec %s %s", ev.Process, ev.Comm)
	case lineage.EventExit:
		if !ev.Status.Known() {
			return fmt.Sprintf("exit %s unknown", ev.Process)
		}
		return fmt.Sprintf("exit %s %d", ev.Process, ev.Status)
	}
	return ev.Kind.String()
}

// A root's declared orphanage (the `lineage run` front that registered it
// with the daemon) hands over its children: a process no scan saw fork
// that is the orphanage's child, born after the root, is the root's
// orphan; one older than the root, or another process's child, is not;
// one two roots of the same orphanage could claim is nobody's.
func TestProcTrackerAdoptsFromADeclaredOrphanage(t *testing.T) {
	front := lineage.Identity{PID: 70, StartTicks: 900}
	root := lineage.Identity{PID: 100, StartTicks: 1000}
	run := func(t *testing.T, roots []lineage.Identity, orphanage lineage.Identity, later []string) ([]string, *procTracker) {
		tr := newProcTracker(diffSelf)
		first := []string{"70@900", "71@901", "100@1000 ppid=70", "200@1100 ppid=70"}
		s0 := parseDiffScan(t, first, time.Second)
		for _, r := range roots {
			tr.addRoot(s0.procs[int(r.PID)], front, false, s0, "/bin/sh", []string{"sh"})
			if err := tr.declareOrphanage(r, orphanage); err != nil {
				t.Fatal(err)
			}
		}
		tr.diff(nil, s0)
		s1 := parseDiffScan(t, append(first, later...), 2*time.Second)
		var got []string
		for _, ev := range tr.diff(s0.procs, s1) {
			got = append(got, diffEventString(ev))
		}
		slices.Sort(got)
		return got, tr
	}
	later := []string{"102@1020 ppid=70", "103@800 ppid=70", "104@1030 ppid=71", "105@1040 ppid=102"}
	got, tr := run(t, []lineage.Identity{root}, front, later)
	want := []string{"exec 102@1020 sh", "fork 102@1020 parent=0@0 root=100@1000", "fork 105@1040 parent=102@1020 root=100@1000"}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	if tr.isMember(lineage.Identity{PID: 103, StartTicks: 800}) || tr.isMember(lineage.Identity{PID: 104, StartTicks: 1030}) {
		t.Error("adopted the orphanage's child older than the root, or another process's child")
	}
	if got, _ := run(t, []lineage.Identity{root}, lineage.Identity{}, later); len(got) != 0 {
		t.Errorf("no orphanage: events %q, want none", got)
	}
	// A declared orphanage that is not the process at that pid (its pid
	// reused) hands over nothing.
	if got, _ := run(t, []lineage.Identity{root}, lineage.Identity{PID: 70, StartTicks: 5}, later); len(got) != 0 {
		t.Errorf("an orphanage by another start time: events %q, want none", got)
	}
	second := lineage.Identity{PID: 200, StartTicks: 1100}
	got, tr = run(t, []lineage.Identity{root, second}, front, []string{"106@1200 ppid=70"})
	if !slices.Equal(got, []string{"fork 106@1200 untracked"}) || tr.unattributed != 1 {
		t.Errorf("two roots' orphanage: events %q, unattributed %d; want the orphan untracked", got, tr.unattributed)
	}
	if err := tr.declareOrphanage(lineage.Identity{PID: 300, StartTicks: 1}, front); !errors.Is(err, loader.ErrNotRoot) {
		t.Errorf("an orphanage for no root: %v", err)
	}
}
