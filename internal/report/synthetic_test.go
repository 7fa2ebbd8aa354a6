package report

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// synthetic writes to out a record of a make -j-like job with n processes:
// a root, then each process forked by one of the 8 latest before it,
// living tens of milliseconds; execs extra execs per process; every 50th
// process is left behind, leaks and is killed by the reaper.
func synthetic(tb testing.TB, out io.Writer, n, execs int) {
	tb.Helper()
	now := time.Duration(0)
	opts := &record.Options{Boot: func() time.Duration { return now }, Wall: func() time.Time { return time.Unix(1_770_000_000, 0).Add(now) }}
	w, err := record.NewWriter(out, record.Header{Lineage: "bench", Host: "bench", Kernel: "6.18"}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ids := make([]lineage.Identity, n)
	base := 100 * time.Second
	var leaks []lineage.Member
	for i := range n {
		ids[i] = lineage.Identity{PID: uint32(1000 + i), StartTicks: uint64(10_000 + i/10)}
		parent := lineage.Identity{PID: 1, StartTicks: 1}
		if i > 0 {
			parent = ids[max(0, i-1-i%8)]
		}
		at := base + time.Duration(i)*time.Millisecond
		ev := lineage.Event{Kind: lineage.EventFork, Time: at, Process: ids[i], Parent: parent, Root: ids[0], IsRoot: i == 0, Comm: "cc"}
		must(tb, w.Event(ev))
		ev.Kind, ev.IsRoot, ev.Filename = lineage.EventExec, false, "/usr/bin/cc"
		for e := range max(execs, 1) {
			ev.Time = at + time.Duration(e)*time.Microsecond
			ev.Argv = []string{"cc", "-O2", "-c", fmt.Sprintf("src/module%d/file%d.c", i%97, i), "-o", fmt.Sprintf("obj/file%d.o", i)}
			must(tb, w.Event(ev))
		}
		if i > 0 && i%50 == 0 {
			leaks = append(leaks, lineage.Member{Identity: ids[i], Parent: parent, Root: ids[0]})
			continue
		}
		ev.Kind, ev.Time, ev.Argv = lineage.EventExit, at+time.Duration(20+i%40)*time.Millisecond, nil
		must(tb, w.Event(ev))
	}
	now = base + time.Duration(n+100)*time.Millisecond
	var rep reap.Report
	for _, m := range leaks {
		must(tb, w.Leak(m, "root exited"))
		rep.Outcomes = append(rep.Outcomes, reap.Outcome{Member: m, Sent: []string{"TERM", "KILL"}, Result: lineage.Killed})
	}
	must(tb, w.Reap(rep, "root exited"))
}

// suiteFacts are what a test needs to know of a suite record.
type suiteFacts struct {
	processes, leaks, kept, killed, lost int
	// missing are the processes the gap took events from, and which.
	missing map[lineage.Identity][]record.Kind
}

// suite writes to out a record shaped like this project's `make test`, of
// about n processes: a shell root runs make, which runs go test; go runs a
// compiler for each of 40 packages' files, a link for each package and its
// test binary; each test binary runs helpers (sh -c, each with a child that
// sleeps or execs the tool under test). One helper's child in 60 is left
// behind: killed by the reaper, or kept, one in five. In the middle of the
// run, the ring overflowed: a placed loss takes the fork of some processes
// and the exit of others, and names the two members it knew.
func suite(tb testing.TB, out io.Writer, n int) suiteFacts {
	tb.Helper()
	now := 100 * time.Second
	opts := &record.Options{Boot: func() time.Duration { return now }, Wall: func() time.Time { return time.Unix(1_770_000_000, 0).Add(now) }}
	w, err := record.NewWriter(out, record.Header{Lineage: "bench", Host: "ci", Kernel: "6.18", Backend: "bpf", Command: []string{"make", "test"}}, opts)
	must(tb, err)
	facts := suiteFacts{missing: map[lineage.Identity][]record.Kind{}}
	pid := uint32(2000)
	at := now
	gapFrom, gapTo := now+time.Duration(n/2)*time.Millisecond, now+time.Duration(n/2+40)*time.Millisecond
	inGap := func(t time.Duration) bool { return t >= gapFrom && t <= gapTo }
	lost := 0
	var leaks []lineage.Member
	kept := map[lineage.Identity]bool{}
	root := lineage.Identity{PID: pid, StartTicks: lineage.DurationToTicks(at)}
	// spawn records a process forked by parent at the current time that
	// runs argv and lives for life (forever when life is 0), and returns it.
	spawn := func(parent lineage.Identity, life time.Duration, argv ...string) lineage.Identity {
		pid++
		at += time.Millisecond
		p := lineage.Identity{PID: pid, StartTicks: lineage.DurationToTicks(at)}
		facts.processes++
		ev := lineage.Event{Kind: lineage.EventFork, Time: at, Process: p, Parent: parent, Root: root, IsRoot: p == root, Comm: argv[0]}
		switch {
		case !inGap(at):
			must(tb, w.Event(ev))
		case pid%3 == 0:
			lost++
			facts.missing[p] = []record.Kind{record.KindFork}
		default:
			must(tb, w.Event(ev))
		}
		ev.Kind, ev.IsRoot, ev.Time, ev.Argv, ev.Filename = lineage.EventExec, false, at+100*time.Microsecond, argv, "/usr/bin/"+argv[0]
		must(tb, w.Event(ev))
		if life == 0 {
			return p
		}
		ev.Kind, ev.Time, ev.Argv, ev.Status = lineage.EventExit, at+life, nil, 0
		if inGap(ev.Time) && pid%3 == 1 {
			lost++
			facts.missing[p] = append(facts.missing[p], record.KindExit)
			return p
		}
		must(tb, w.Event(ev))
		return p
	}
	pid--
	at -= time.Millisecond
	total := time.Duration(n+200) * time.Millisecond
	spawn(lineage.Identity{PID: 1, StartTicks: 1}, total, "sh", "-c", "make test")
	mk := spawn(root, total-time.Millisecond, "make", "test")
	gotest := spawn(mk, total-2*time.Millisecond, "go", "test", "-race", "-count=1", "./...")
	const pkgs = 40
	perPkg := max((n-5+pkgs-1)/pkgs, 4)
	for k := range pkgs {
		pkg := fmt.Sprintf("github.com/lineage-dev/lineage/internal/pkg%03d", k)
		files := perPkg / 4
		for f := range files {
			spawn(gotest, 30*time.Millisecond, "/usr/lib/go/pkg/tool/linux_amd64/compile", "-o", fmt.Sprintf("$WORK/b%03d/_pkg_.a", k), "-p", pkg, "-race", fmt.Sprintf("./file%03d.go", f))
		}
		spawn(gotest, 40*time.Millisecond, "/usr/lib/go/pkg/tool/linux_amd64/link", "-o", fmt.Sprintf("$WORK/b%03d/pkg%03d.test", k, k))
		bin := spawn(gotest, time.Duration(perPkg)*time.Millisecond, fmt.Sprintf("/tmp/go-build/b%03d/pkg%03d.test", k, k), "-test.count=1", "-test.timeout=45m")
		for h := 0; facts.processes < 3+(k+1)*perPkg && h < perPkg; h++ {
			sh := spawn(bin, 5*time.Millisecond, "sh", "-c", fmt.Sprintf("helper %d of pkg%03d", h, k))
			if h%60 == 59 {
				child := spawn(sh, 0, "sleep", fmt.Sprintf("97.%d", pid))
				m := lineage.Member{Identity: child, Parent: sh, Root: root}
				if len(leaks)%5 == 4 {
					kept[child] = true
				}
				leaks = append(leaks, m)
				continue
			}
			spawn(sh, 2*time.Millisecond, "lineage-tool", "--case", fmt.Sprint(h))
		}
	}
	// Two members the tracker knew: one whose exec was lost, one all of
	// whose events were.
	pid++
	facts.processes++
	execLost := lineage.Identity{PID: pid, StartTicks: lineage.DurationToTicks(gapFrom)}
	fork := lineage.Event{Kind: lineage.EventFork, Time: gapFrom, Process: execLost, Parent: gotest, Root: root, Comm: "go"}
	must(tb, w.Event(fork))
	fork.Kind, fork.Time = lineage.EventExit, gapTo+time.Millisecond
	must(tb, w.Event(fork))
	facts.missing[execLost] = []record.Kind{record.KindExec}
	ghost := lineage.Identity{PID: pid + 1, StartTicks: lineage.DurationToTicks(gapFrom)}
	facts.missing[ghost] = []record.Kind{record.KindFork, record.KindExit}
	facts.processes++
	lost += 4
	now = 100*time.Second + total + 50*time.Millisecond
	var rep reap.Report
	for i, m := range leaks {
		must(tb, w.Leak(m, "root exited"))
		switch {
		case kept[m.Identity]:
			rep.Outcomes = append(rep.Outcomes, reap.Outcome{Member: m, Result: lineage.Kept, Reason: "keep rule: exe:/usr/bin/sleep"})
		case i%3 == 0:
			rep.Outcomes = append(rep.Outcomes, reap.Outcome{Member: m, Sent: []string{"TERM", "KILL"}, Result: lineage.Killed})
		default:
			rep.Outcomes = append(rep.Outcomes, reap.Outcome{Member: m, Sent: []string{"TERM"}, Result: lineage.Terminated})
		}
	}
	must(tb, w.Reap(rep, "root exited"))
	now += 100 * time.Millisecond
	for _, o := range rep.Outcomes {
		if o.Result != lineage.Kept {
			must(tb, w.Event(lineage.Event{Kind: lineage.EventExit, Time: now, Process: o.Member.Identity, Parent: o.Member.Parent, Root: root, Status: lineage.ExitStatus(15)}))
		}
	}
	must(tb, w.LossIn(uint64(lost), "events lost", record.Placement{From: gapFrom, To: gapTo, Members: []record.LostMember{
		{Process: execLost, Kinds: []record.Kind{record.KindExec}}, {Process: ghost},
	}}))
	facts.leaks, facts.kept, facts.lost = len(leaks), len(kept), lost
	for _, o := range rep.Outcomes {
		facts.killed += b2i(o.Result == lineage.Killed)
	}
	return facts
}
