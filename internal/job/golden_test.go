package job

import (
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// goldenReports are the reports whose text and JSON testdata/report holds.
func goldenReports() map[string]func() *Report {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	a := lineage.Identity{PID: 101, StartTicks: 6}
	b := lineage.Identity{PID: 102, StartTicks: 7}
	c := lineage.Identity{PID: 103, StartTicks: 8}
	d := lineage.Identity{PID: 104, StartTicks: 9}
	e := lineage.Identity{PID: 105, StartTicks: 10}
	started := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	st := lineage.ExitStatus(2 << 8)
	return map[string]func() *Report{
		"reaped": func() *Report {
			r := &Report{
				Command:     []string{"sh", "-c", "sleep 1 & nohup x"},
				Root:        root,
				Backend:     loader.Choice{Backend: "bpf", Asked: "auto", Reason: "bpf: loaded"},
				Started:     started,
				JobTook:     12345678 * time.Microsecond,
				Decision:    "reap: the root exited",
				Reaping:     "on (default)",
				Interrupted: "INT",
				Reap: &reap.Report{Containment: "kernel", Took: 1234567 * time.Microsecond, Passes: 2,
					Phases:    reap.Phases{Kill: time.Millisecond},
					Survivors: []lineage.Identity{e},
					Outcomes: []reap.Outcome{
						{Member: lineage.Member{Identity: root, Comm: "sh"}, Age: 3 * time.Second, Result: lineage.Exited, Status: &st},
						{Member: lineage.Member{Identity: a, Parent: root}, Argv: []string{"sleep", "1"}, Age: 2500 * time.Millisecond, Signal: "TERM", Sent: []string{"TERM"}, Result: lineage.Terminated},
						{Member: lineage.Member{Identity: b, Parent: a, Comm: "bash"}, Result: lineage.Vanished},
						{Member: lineage.Member{Identity: c, Parent: a}, Argv: []string{"x y", "it's"}, Result: lineage.Kept, Reason: "kept by --keep exe:/x"},
						{Member: lineage.Member{Identity: d, Parent: a}, Result: lineage.Refused, Reason: "an ancestor of lineage"},
						{Member: lineage.Member{Identity: e, Parent: a}, Signal: "KILL", Result: lineage.Survived, Reason: "no permission"},
					}},
				Contained: []lineage.Identity{b, c},
				Stats:     loader.Stats{EventsLost: 3, MembersFull: 2, Forks: 10},
				Warnings:  []string{"reap: something"},
			}
			r.SetStatus(9)
			r.WarnLosses("proc")
			return r
		},
		"leftovers": func() *Report {
			r := &Report{
				Command:  []string{"./start.sh"},
				Root:     root,
				Backend:  loader.Choice{Backend: "proc", Asked: "proc", Reason: "asked"},
				Started:  started,
				JobTook:  1500 * time.Microsecond,
				Decision: "report: reaping is off: LINEAGE_REAPING=off (would reap: the root exited)",
				Reaping:  "off (LINEAGE_REAPING=off)",
				Leftovers: []Leftover{
					{Member: lineage.Member{Identity: root}, Argv: []string{"./start.sh"}, Age: time.Second},
					{Member: lineage.Member{Identity: a, Parent: root, Comm: "redis"}, Age: 61 * time.Second},
					{Member: lineage.Member{Identity: b, Parent: a}, Argv: []string{"sleep", "$HOME"}, Age: 999 * time.Microsecond},
					// Adopted as an orphan: its parent was never known.
					{Member: lineage.Member{Identity: c}, Argv: []string{"daemon"}, Age: 2 * time.Second},
				},
			}
			r.SetStatus(0)
			r.WarnLosses("proc")
			return r
		},
		"deadline": func() *Report {
			r := &Report{
				Command:  []string{"sleep", "100"},
				Root:     root,
				Backend:  loader.Choice{Backend: "bpf"},
				Started:  started,
				JobTook:  30 * time.Second,
				Deadline: true,
				Decision: "reap: the deadline passed",
				Reap: &reap.Report{Outcomes: []reap.Outcome{
					{Member: lineage.Member{Identity: root}, Argv: []string{"sleep", "100"}, Signal: "TERM", Result: lineage.Terminated},
					{Member: lineage.Member{Identity: a, Parent: root}, Result: lineage.Vanished},
				}},
			}
			r.SetStatus(15)
			return r
		},
		"clean": func() *Report {
			r := &Report{Command: []string{"true"}, Root: root, Backend: loader.Choice{Backend: "bpf"}, Started: started, JobTook: 42 * time.Millisecond, Decision: "reap: the root exited", Reap: &reap.Report{}}
			r.SetStatus(0)
			r.WarnLosses("proc")
			return r
		},
		"unfinished": func() *Report {
			return &Report{Command: []string{""}, Backend: loader.Choice{Backend: "bpf"}}
		},
	}
}
