package report

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// hostile is an argv word that tries every trick: closing the page's
// script, an HTML injection, terminal escapes and a newline.
const hostile = "</script><img src=x onerror=alert(1)>\x1b[2J\x1b[31mred\nline2\u202e"

// fixture writes, with fixed clocks, the record of a make -j-like job: a
// shell root runs make, which runs three compilers in parallel and a short
// chain; a daemon is left behind and killed by the reaper, a dev server is
// kept, one word of argv is hostile, and the kernel lost two events.
func fixture(tb testing.TB) []byte {
	tb.Helper()
	var buf bytes.Buffer
	now := 100 * time.Second
	opts := &record.Options{
		Boot: func() time.Duration { return now },
		Wall: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(now) },
	}
	w, err := record.NewWriter(&buf, record.Header{Lineage: "test", Host: "ci-7", Kernel: "6.18.0", Command: []string{"sh", "-c", "make -j3"}}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	super := id(50, 100)
	sh, mk := id(1000, 10000), id(1001, 10001)
	at := func(ms int) time.Duration { return 100*time.Second + time.Duration(ms)*time.Millisecond }
	ev := func(kind lineage.EventKind, ms int, p, parent lineage.Identity, argv ...string) lineage.Event {
		e := lineage.Event{Kind: kind, Time: at(ms), Process: p, Parent: parent, Root: sh, Comm: "comm"}
		if kind == lineage.EventExec {
			e.Argv, e.Filename = argv, "/usr/bin/"+argv[0]
		}
		return e
	}
	events := []lineage.Event{
		{Kind: lineage.EventFork, Time: at(0), Process: sh, Parent: super, Root: sh, IsRoot: true, Comm: "lineage"},
		ev(lineage.EventExec, 1, sh, super, "sh", "-c", "make -j3"),
		ev(lineage.EventFork, 2, mk, sh),
		ev(lineage.EventExec, 3, mk, sh, "make", "-j3"),
	}
	for i, pid := range []uint32{1002, 1003, 1004} {
		cc := id(pid, 10002)
		events = append(events,
			ev(lineage.EventFork, 10+i, cc, mk),
			ev(lineage.EventExec, 11+i, cc, mk, "cc", "-c", []string{"a.c", "b.c", "c.c"}[i]),
			ev(lineage.EventExit, 400+100*i, cc, mk))
	}
	a, b, c := id(1010, 10050), id(1011, 10050), id(1012, 10050)
	events = append(events,
		ev(lineage.EventFork, 500, a, mk), ev(lineage.EventExec, 500, a, mk, "sh", "-c", "tr a b | wc"),
		ev(lineage.EventFork, 501, b, a), ev(lineage.EventExec, 501, b, a, "tr", "a", "b"),
		ev(lineage.EventFork, 501, c, b), ev(lineage.EventExec, 502, c, b, "echo", hostile),
		ev(lineage.EventExit, 502, c, b), ev(lineage.EventExit, 503, b, a), ev(lineage.EventExit, 503, a, mk))
	daemon, dev := id(1020, 10060), id(1030, 10070)
	events = append(events,
		ev(lineage.EventFork, 600, daemon, mk), ev(lineage.EventExec, 601, daemon, mk, "redis-server", "--daemonize", "yes"),
		ev(lineage.EventFork, 700, dev, sh), ev(lineage.EventExec, 701, dev, sh, "npm", "run", "dev"),
		ev(lineage.EventExit, 900, mk, sh), ev(lineage.EventExit, 1000, sh, super))
	for _, e := range events {
		if e.Kind == lineage.EventExit {
			e.Status = 0
			if e.Process == mk {
				e.Status = 2 << 8
			}
		}
		now = e.Time
		must(tb, w.Event(e))
	}
	now = at(1001)
	must(tb, w.Loss(2))
	for _, m := range []lineage.Identity{daemon, dev} {
		parent := mk
		if m == dev {
			parent = sh
		}
		must(tb, w.Leak(lineage.Member{Identity: m, Parent: parent, Root: sh}, "root exited"))
	}
	now = at(1200)
	must(tb, w.Reap(reap.Report{Outcomes: []reap.Outcome{
		{Member: lineage.Member{Identity: daemon, Parent: mk, Root: sh}, Sent: []string{"TERM", "KILL"}, Result: lineage.Killed},
		{Member: lineage.Member{Identity: dev, Parent: sh, Root: sh}, Result: lineage.Kept, Reason: "keep rule: dev server"},
	}}, "root exited"))
	now = at(1300)
	must(tb, w.Event(lineage.Event{Kind: lineage.EventExit, Time: now, Process: daemon, Parent: mk, Root: sh, Status: lineage.ExitStatus(syscall.SIGKILL)}))
	return buf.Bytes()
}

func id(pid uint32, start uint64) lineage.Identity {
	return lineage.Identity{PID: pid, StartTicks: start}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func build(tb testing.TB, data []byte) *Report {
	tb.Helper()
	r, err := record.NewReader(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	rep, err := Build(r)
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}
