package job

import (
	"strings"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

func TestReportIncompleteAndStrictExit(t *testing.T) {
	id := lineage.Identity{PID: 42, StartTicks: 7}
	for _, c := range []struct {
		name string
		rep  Report
		want string // a part of the reasons; "" for complete
	}{
		{"complete", Report{Reap: &reap.Report{}}, ""},
		{"map full", Report{Stats: loader.Stats{MembersFull: 3}}, "3 processes were not tracked"},
		{"events lost", Report{Stats: loader.Stats{EventsLost: 1}}, "1 event lost"},
		{"orphans", Report{Stats: loader.Stats{Unattributed: 2}}, "2 unattributed orphans"},
		{"timed out", Report{ReapTimedOut: true}, "--reap-timeout"},
		{"survivor", Report{Reap: &reap.Report{Survivors: []lineage.Identity{id}}}, "1 process survived"},
		{"refused", Report{Reap: &reap.Report{Outcomes: []reap.Outcome{{Result: lineage.Refused}}}}, "refused a signal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.rep
			r.Incomplete = r.Incompleteness()
			got := strings.Join(r.Incomplete, "; ")
			if c.want == "" {
				if got != "" {
					t.Errorf("incomplete %q, want none", got)
				}
				if code := r.StrictExitCode(0); code != 0 {
					t.Errorf("strict exit %d, want 0", code)
				}
				return
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("incomplete %q, want it to say %q", got, c.want)
			}
			if code := r.StrictExitCode(0); code != lineage.ExitIncomplete {
				t.Errorf("strict exit %d, want %d", code, lineage.ExitIncomplete)
			}
			if code := r.StrictExitCode(2); code != 2 {
				t.Errorf("strict exit of a failed job %d, want its own 2", code)
			}
		})
	}
}

func TestExitCodeOfAFatalSignal(t *testing.T) {
	end := End{Exited: true, Fatal: syscall.SIGUSR1}
	if got := end.ExitCode(); got != 128+10 {
		t.Errorf("exit %d, want 138", got)
	}
}
