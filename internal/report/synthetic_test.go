package report

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
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
